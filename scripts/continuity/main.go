// Command continuity checks mid-stream continuation end to end: it sends
// the same streaming requests through the gateway (whose first route cuts
// streams) and straight to a healthy simulator, and compares the text the
// client got, byte for byte. The simulator's text is a pure function of
// (seed, prompt), so an answer continued after a cut must equal the
// uninterrupted one. It prints how many answers were complete, interrupted,
// failed, and how many differ from the uninterrupted text.
//
//	go run ./scripts/continuity --gateway http://127.0.0.1:8080/v1 --key K --model cont \
//	  --direct http://127.0.0.1:8081/v1 --requests 1000 --concurrency 50
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/sse"
)

func main() {
	gateway := flag.String("gateway", "", "the gateway's OpenAI base URL (…/v1)")
	key := flag.String("key", "", "the gateway key")
	model := flag.String("model", "", "the gateway model (first route cuts, continue_on_cut on)")
	direct := flag.String("direct", "", "the healthy simulator's OpenAI base URL (…/v1)")
	directModel := flag.String("direct-model", "sim-model", "the model name sent to the simulator")
	requests := flag.Int("requests", 1000, "requests")
	concurrency := flag.Int("concurrency", 50, "requests at once")
	flag.Parse()
	if *gateway == "" || *model == "" || *direct == "" {
		fmt.Fprintln(os.Stderr, "continuity: --gateway, --model and --direct are required")
		os.Exit(2)
	}
	var complete, interrupted, failed, differ atomic.Int64
	var firstDiff sync.Once
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				prompt := fmt.Sprintf("continuity check %d: tell me about streams", i)
				got, done, err := chat(*gateway, *key, *model, prompt)
				switch {
				case err != nil:
					failed.Add(1)
					continue
				case !done:
					interrupted.Add(1)
					continue
				}
				complete.Add(1)
				want, _, err := chat(*direct, "", *directModel, prompt)
				if err != nil {
					failed.Add(1)
					continue
				}
				if got != want {
					differ.Add(1)
					firstDiff.Do(func() { fmt.Fprintf(os.Stderr, "first difference (request %d):\n got  %q\n want %q\n", i, got, want) })
				}
			}
		}()
	}
	for i := range *requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	n := float64(*requests)
	fmt.Printf("requests %d: complete %d, interrupted %d (%.2f%%), failed %d (%.2f%%); complete answers differing from the uninterrupted text: %d\n",
		*requests, complete.Load(), interrupted.Load(), float64(interrupted.Load())/n*100, failed.Load(), float64(failed.Load())/n*100, differ.Load())
	if interrupted.Load()+failed.Load()+differ.Load() > 0 {
		os.Exit(1)
	}
}

// chat streams one answer and returns its text and whether it ended with [DONE].
func chat(base, key, model, prompt string) (string, bool, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", false, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var text bytes.Buffer
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return text.String(), true, nil
		}
		if err != nil {
			return text.String(), false, nil
		}
		var c struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(ev.Data, &c) != nil || len(c.Error) > 0 {
			return text.String(), false, nil
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
}
