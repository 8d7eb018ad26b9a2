package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/demo"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

func newDemoCmd(e *env) *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the benchmark matrix on simulated upstreams and print the four tables",
		Long: `demo starts a simulated upstream in-process and the gateway as a child process
(once per GC setting, so GOGC/GOMEMLIMIT apply to the gateway alone), runs the
streaming benchmark through them and prints:

  1. gateway GC setting × latency (GOGC=100, GOGC=400, GOGC=off,GOMEMLIMIT=1GiB)
  2. model × cost (published output prices, projected monthly cost of 10M output tokens)
  3. direct vs through the gateway on a flaky upstream
  4. agent sessions × prompt-cache affinity (multi-turn sessions over 3 routes ×
     2 provider keys, affinity off and session: cost, cache-read share, TTFT)

Upstreams are simulated: the figures describe the gateway and this machine,
not real providers. The merged benchmark result is written as JSON
("streamgate bench compare" reads it), and an HTML report shows the four
tables, each with the latency plots of its runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("demo: find own executable: %w", err)
			}
			o.Exe, o.Out, o.Log = exe, e.stdout, e.stderr
			_, err = demo.Run(cmd.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Quick, "quick", false, "smaller loads: the whole demo takes about a minute (64 s measured on 2 shared cores, 2026-12)")
	f.StringVar(&o.JSONPath, "json", "streamgate-demo.json", `write the merged benchmark result here ("-" for none)`)
	f.StringVar(&o.HTMLPath, "html", "streamgate-demo.html", `write the HTML report here ("-" for none)`)
	f.IntVar(&o.Concurrency, "concurrency", 0, "streams of the GC table (0 = 100 with --quick, else 300)")
	f.IntVar(&o.Requests, "requests", 0, "requests per GC setting (0 = 300 with --quick, else 1500)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of request sequences and simulated output")
	return cmd
}
