// Command bodymem measures what large request bodies cost a running
// gateway: it sends N bodies of SIZE bytes of a worst shape at once to the
// gateway at -url and prints the statuses and the gateway's peak RSS
// (VmHWM of -pid, Linux), so that issue 22's bound (8 bodies of 10 MiB at
// once under 600 MiB) can be checked by anyone:
//
//	go run ./scripts/bodymem -url http://127.0.0.1:8080 -pid $PID -key $KEY -model m
//
// Shapes: one-word (100,000 messages {"role":"user","content":"hi"}, the
// most a request may hold, the last one padded to SIZE), turns (the same,
// user and assistant alternating), parts (one message of many text parts),
// tools (many tools).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "gateway base URL")
	key := flag.String("key", os.Getenv("STREAMGATE_API_KEY"), "API key")
	model := flag.String("model", "m", "model")
	pid := flag.Int("pid", 0, "gateway process id (for its peak RSS)")
	n := flag.Int("n", 8, "bodies at once")
	size := flag.Int("size", 10<<20-1024, "body size in bytes")
	shape := flag.String("shape", "one-word", "one-word | turns | parts | tools")
	flag.Parse()

	elem, head, tail := `{"role":"user","content":"hi"}`, `{"model":%q,"max_tokens":8,"messages":[`, `]}`
	switch *shape {
	case "turns":
		elem = `{"role":"user","content":"a"},{"role":"assistant","content":"b"}`
		tail = `,{"role":"user","content":"c"}]}`
	case "tools":
		elem, head, tail = `{"type":"function","function":{"name":"f"}}`, `{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[`, `]}`
	case "parts":
		elem, head, tail = `{"type":"text","text":"a"}`, `{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":[`, `]}]}`
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, head, *model)
	pad := `{"role":"user","content":"`
	for i := 0; b.Len()+len(elem)+len(tail)+len(pad)+4 < *size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == 99_998 && (*shape == "one-word" || *shape == "turns") {
			// The most messages a request may hold (api.MaxMessages),
			// the rest of the size in the last one's text.
			b.WriteString(pad + strings.Repeat("x", *size-b.Len()-len(pad)-4-len(tail)) + `"}`)
			break
		}
		b.WriteString(elem)
	}
	b.WriteString(tail)
	body := b.Bytes()

	before := rss(*pid, "VmRSS")
	start := time.Now()
	var wg sync.WaitGroup
	status := make([]string, *n)
	for i := range *n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, *url+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+*key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				status[i] = err.Error()
				return
			}
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
			resp.Body.Close()
			status[i] = fmt.Sprint(resp.StatusCode)
			if resp.StatusCode != http.StatusOK {
				status[i] += " " + strings.TrimSpace(string(msg))
			}
		})
	}
	wg.Wait()
	fmt.Printf("shape %s: %d bodies of %d bytes at once in %v\n", *shape, *n, len(body), time.Since(start).Round(time.Millisecond))
	for i, s := range status {
		fmt.Printf("  request %d: %s\n", i, s)
	}
	if *pid > 0 {
		fmt.Printf("gateway RSS before %s, peak (VmHWM) %s\n", before, rss(*pid, "VmHWM"))
	}
}

// rss reads a field of /proc/PID/status ("VmHWM", "VmRSS").
func rss(pid int, field string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
