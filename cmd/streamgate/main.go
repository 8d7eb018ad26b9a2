// Command streamgate is an OpenAI-compatible LLM gateway built for streaming
// latency, with a streaming benchmark and a simulated upstream beside it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := notifyContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// notifyContext returns a context that ends on the first SIGINT or SIGTERM
// with a *signalCause as its cause (context.Cause), through which a command
// learns which signal it was and receives the later ones: serve stops at
// once on a second signal instead of draining. Commands that do not look
// at the cause keep ignoring later signals, as with signal.NotifyContext.
// stop releases the signals.
func notifyContext(parent context.Context) (ctx context.Context, stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case s := <-sigs:
			cancel(&signalCause{sig: s, again: sigs})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(context.Canceled)
	}
}

// signalCause is why the context of run ended when a signal did it.
type signalCause struct {
	sig   os.Signal
	again <-chan os.Signal // the signals that follow
}

func (c *signalCause) Error() string { return signalName(c.sig) + " received" }

// Is makes the cause match context.Canceled, like signal.NotifyContext's.
func (c *signalCause) Is(target error) bool { return target == context.Canceled }

// signalName is the conventional name of s: SIGINT, SIGTERM.
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// signalExitStatus is the exit status of a process stopped by s, as a shell
// reports one killed by it: 128 + the signal number (130 for SIGINT, 143
// for SIGTERM).
func signalExitStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}
