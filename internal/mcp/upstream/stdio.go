package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Grace periods of a stdio server's shutdown: after its stdin is closed,
// then after SIGTERM to its process group; SIGKILL follows.
var (
	stdinGrace = 2 * time.Second
	termGrace  = 2 * time.Second
)

// stdioDialer starts the configured command as a link: newline-delimited
// JSON-RPC on its stdin and stdout, stderr lines to the log.
func stdioDialer(c *core) dialer {
	return dialer{kind: "process", probe: true, dial: func(ctx context.Context, gen int64, deliver func(*jsonrpc.Message), gone func(error)) (link, error) {
		p, err := startProcess(c, deliver, gone)
		if err != nil {
			return nil, err
		}
		return p, nil
	}}
}

// environ is a stdio server's whole environment: PATH and HOME from the
// gateway's, then Config.Env (sorted, so the order is stable).
func environ(extra map[string]string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path}
	if home := os.Getenv("HOME"); home != "" {
		env = append(env, "HOME="+home)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// process is a running stdio server.
type process struct {
	c       *core
	cmd     *exec.Cmd
	pgid    int
	stdin   io.WriteCloser
	wmu     sync.Mutex // one message at a time on stdin
	exited  chan struct{}
	closing sync.Once
	done    chan struct{} // the process's goroutines have finished
}

func startProcess(c *core, deliver func(*jsonrpc.Message), gone func(error)) (*process, error) {
	argv := c.cfg.Command
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = environ(c.cfg.Env)
	// Its own process group, so that Close and a death reap whatever it
	// started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Pipes of our own rather than StdoutPipe: Wait then does not close
	// the read ends under the readers, which drain what the process wrote
	// before it died (the answer of a call may be there).
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, c.errorf("starting %q: %w", argv[0], err)
	}
	p := &process{c: c, cmd: cmd, pgid: cmd.Process.Pid, stdin: stdin, exited: make(chan struct{}), done: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Go(func() { p.readStdout(outR, deliver) })
	readers.Go(func() { p.readStderr(errR) })
	c.wg.Go(func() {
		defer close(p.done)
		err := cmd.Wait()
		close(p.exited)
		// Whatever the process started dies with it; then the pipes'
		// write ends are closed and the readers see EOF. A descendant that
		// left the group could hold them open: the readers get a grace
		// period, then their pipes are closed under them.
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		finished := make(chan struct{})
		go func() { readers.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(2 * time.Second):
			outR.Close()
			errR.Close()
			<-finished
		}
		outR.Close()
		errR.Close()
		if err == nil {
			err = errors.New("exited")
		}
		gone(err)
	})
	return p, nil
}

// send writes one message and its newline.
func (p *process) send(ctx context.Context, msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		return p.c.errorf("a message for stdio holds a newline") // json.Marshal never writes one
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	select {
	case <-p.exited:
		return p.c.errorf("process exited: %w", errGone)
	default:
	}
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	if _, err := p.stdin.Write(buf); err != nil {
		return p.c.errorf("writing to the process: %v: %w", err, errGone)
	}
	return nil
}

func (p *process) replyTo(*replyTo) {}

// close asks the process to exit (stdin closed), then its group (SIGTERM),
// then kills the group, and waits for its goroutines.
func (p *process) close() {
	p.closing.Do(func() {
		p.wmu.Lock()
		p.stdin.Close()
		p.wmu.Unlock()
		select {
		case <-p.exited:
		case <-time.After(stdinGrace):
			_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(termGrace):
			}
		}
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	})
	<-p.done
}

// readStdout reads newline-delimited messages, each bounded by MaxResult.
func (p *process) readStdout(r io.Reader, deliver func(*jsonrpc.Message)) {
	readLines(r, p.c.max, func(line []byte) {
		msgs, _, err := jsonrpc.Decode(line, p.c.limits())
		if err != nil {
			p.c.log.Warn("mcp upstream: the process wrote a line that is not a message", "err", err, "line", clipString(string(line), 200))
			return
		}
		for i := range msgs {
			deliver(&msgs[i])
		}
	}, func(prefix []byte) {
		// Too long to keep: if its start names a call in flight, that call
		// fails now rather than at its idle timeout.
		err := p.c.tooLarge("a message from the process")
		if id, ok := leadingID(prefix); ok {
			if cl := p.c.call(id); cl != nil {
				cl.cancel(err)
				return
			}
		}
		p.c.log.Warn("mcp upstream: dropped a message over the limit", "limit", p.c.max)
	})
}

// readLines calls line for each line of r (a copy, without its line end)
// up to max bytes long; a longer one is skipped, and tooLong gets its
// first bytes.
func readLines(r io.Reader, max int, line func([]byte), tooLong func(prefix []byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	skipping := false
	var prefix []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && !skipping {
			if len(buf)+len(chunk) > max+2 { // +2: the line end
				skipping = true
				prefix = append(buf[:0:0], buf...)
				if len(prefix) < 1024 {
					prefix = append(prefix, bytes.TrimSuffix(chunk, []byte("\n"))[:min(len(bytes.TrimSuffix(chunk, []byte("\n"))), 1024-len(prefix))]...)
				}
				prefix = prefix[:min(len(prefix), 1024)]
				buf = buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if skipping {
			if err == nil {
				tooLong(prefix)
				skipping, prefix = false, nil
			}
		} else if err == nil || (err == io.EOF && len(buf) > 0) {
			l := bytes.TrimRight(buf, "\r\n")
			if len(bytes.TrimSpace(l)) > 0 {
				line(bytes.Clone(l))
			}
			buf = buf[:0]
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// leadingID finds a numeric "id" member among the first members of a
// message's first bytes.
func leadingID(prefix []byte) (int64, bool) {
	i := bytes.Index(prefix, []byte(`"id"`))
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(prefix[i+4:], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return 0, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	return idOf(rest[:end])
}

// readStderr logs the process's stderr, a line at a time.
func (p *process) readStderr(r io.Reader) {
	const maxLine = 4 << 10
	readLines(r, maxLine, func(line []byte) {
		p.c.log.Info("mcp server stderr", "line", string(line))
	}, func(prefix []byte) {
		p.c.log.Info("mcp server stderr", "line", fmt.Sprintf("%s… (cut at %d bytes)", prefix, len(prefix)))
	})
}
