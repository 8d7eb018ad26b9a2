package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// env is how commands read the environment, so tests can pass their own.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// usageError marks bad command-line usage: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// configError marks an invalid or unreadable config: exit status 2, like
// bad usage, and each of its problems printed on a line of its own (a
// config error joins one problem per line, "file:line: path: message").
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// exitError ends the command with a given exit status; err, when not nil,
// is printed like any error (the command has said the rest in its log).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// run executes the CLI and returns the exit status: 0 success, 1 runtime
// failure, 2 bad usage or an invalid config (or the status an exitError
// asks for). Errors are printed to stderr as one line, except a config
// error: one line per problem.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := &env{getenv: getenv, stdout: stdout, stderr: stderr}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code, lines := 1, false
	var (
		ue usageError
		ce configError
		xe exitError
	)
	switch {
	case errors.As(err, &xe):
		code, err = xe.code, xe.err
	case errors.As(err, &ce):
		code, lines = 2, true
	case errors.As(err, &ue) || isCobraUsage(err):
		code = 2
	}
	if err == nil {
		return code
	}
	if lines {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintf(stderr, "streamgate: %s\n", line)
		}
		return code
	}
	fmt.Fprintf(stderr, "streamgate: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	return code
}

// isCobraUsage recognises the flag and argument errors cobra produces itself.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "streamgate",
		Short:         "OpenAI-compatible LLM gateway built for streaming latency",
		Long:          "streamgate is a self-hosted, OpenAI-compatible LLM gateway that relays streams without buffering\nand measures every one, with a streaming benchmark and a simulated upstream beside it.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(e))
	for _, add := range subcommands {
		root.AddCommand(add(e))
	}
	return root
}

// subcommands is filled by the init functions of the files that define
// each subcommand (serve.go, sim.go, bench.go, demo.go, keys.go, usage.go).
var subcommands []func(*env) *cobra.Command

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version and build info",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = s.Value
					}
				}
			}
			fmt.Fprintf(e.stdout, "streamgate %s (commit %s, %s, %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
