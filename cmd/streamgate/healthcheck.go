package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newHealthcheckCmd) }

// defaultHealthURL is the readiness endpoint of a gateway on its default
// address, seen from inside its own container.
const defaultHealthURL = "http://127.0.0.1:8080/readyz"

// maxHealthBody bounds what healthcheck reads of the answer.
const maxHealthBody = 64 << 10

func newHealthcheckCmd(e *env) *cobra.Command {
	var (
		target  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the gateway answers ready, 1 otherwise",
		Long: `healthcheck asks a gateway's readiness endpoint (--url, default ` + defaultHealthURL + `)
and exits 0 when it answers 2xx (a degraded replica, whose ledger is unreachable but
which still serves, is ready), 1 when it answers anything else or not within
--timeout, 2 on bad usage. It is the health check of the container image, which has
no shell or curl:

  HEALTHCHECK CMD ["streamgate", "healthcheck"]                 # Dockerfile
  test: ["CMD", "streamgate", "healthcheck"]                    # Docker Compose

It never goes through HTTP(S)_PROXY. One line on stdout says what it saw.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(target)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--url %q: want an http:// or https:// URL", target)
			}
			if timeout <= 0 {
				return usagef("--timeout: must be positive, got %v", timeout)
			}
			line, err := healthcheck(cmd.Context(), target, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, line)
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "url", defaultHealthURL, "the readiness URL to ask")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}

// healthcheck GETs target and returns a line describing a ready answer, or
// an error naming what was wrong.
func healthcheck(ctx context.Context, target string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "", err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the gateway itself, never through a proxy
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("healthcheck %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	var st struct {
		Status  string `json:"status"`
		Replica string `json:"replica"`
		Reason  string `json:"reason"`
	}
	_ = json.Unmarshal(body, &st) // any 2xx is ready; the body only adds detail
	who := ""
	if st.Replica != "" {
		who = " (replica " + st.Replica + ")"
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		detail := st.Status
		if st.Reason != "" {
			detail += ": " + st.Reason
		}
		if detail == "" {
			detail = string(body)
			if len(detail) > 200 {
				detail = detail[:200]
			}
		}
		return "", fmt.Errorf("healthcheck %s: not ready%s: HTTP %d %s", target, who, resp.StatusCode, detail)
	}
	line := fmt.Sprintf("ready%s: HTTP %d", who, resp.StatusCode)
	if st.Status != "" {
		line += " " + st.Status
	}
	if st.Reason != "" {
		line += ": " + st.Reason
	}
	return line, nil
}
