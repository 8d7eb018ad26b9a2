package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// gateway is a "streamgate serve" child process.
type gateway struct {
	once sync.Once
	cmd  *exec.Cmd
	url  string // http://127.0.0.1:PORT
	done chan error
}

var listenURL = regexp.MustCompile(`http://(127\.0\.0\.1|\[::1\]|localhost):[0-9]+`)

// startGateway starts exe serve with the config and extra environment and
// waits for the line that names its address. Its output is drained so the
// child never blocks on a full pipe.
func startGateway(ctx context.Context, exe, cfgPath string, env []string, log io.Writer) (*gateway, error) {
	cmd := exec.Command(exe, "serve", "--config", cfgPath, "--addr", "127.0.0.1:0")
	cmd.Env = childEnv(os.Environ(), env)
	bindToParent(cmd)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start gateway %s: %w", exe, err)
	}
	g := &gateway{cmd: cmd, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		pw.CloseWithError(io.EOF)
		g.done <- err
	}()
	found := make(chan string, 1)
	var head strings.Builder // early output, shown when the gateway fails to start
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			if !sent {
				if head.Len() < 4096 {
					head.WriteString(sc.Text() + "\n")
				}
				if u := listenURL.FindString(sc.Text()); u != "" {
					found <- u
					sent = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		if !sent {
			close(found)
		}
	}()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case u, ok := <-found:
		if !ok {
			var err error
			g.once.Do(func() { err = <-g.done })
			return nil, fmt.Errorf("demo: gateway exited before listening (%v): %s", err, strings.TrimSpace(head.String()))
		}
		g.url = u
		fmt.Fprintf(log, "demo: gateway pid %d on %s\n", cmd.Process.Pid, u)
		return g, nil
	case <-timeout.C:
		g.stop()
		return nil, errors.New("demo: gateway did not report its address within 30s")
	case <-ctx.Done():
		g.stop()
		return nil, ctx.Err()
	}
}

// stop sends SIGTERM (graceful shutdown) and kills the process if it has not
// exited within 10s.
func (g *gateway) stop() {
	g.once.Do(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(10 * time.Second):
			_ = g.cmd.Process.Kill()
			<-g.done
		}
	})
}

// childEnv is base without any GC setting, plus extra: the demo alone decides
// the gateway's GOGC and GOMEMLIMIT.
func childEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		if strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}
