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

// version, commit and date may be set at build time with -ldflags
// "-X main.version=v1.2.3 -X main.commit=... -X main.date=..." (GoReleaser,
// deploy/Dockerfile); unset, they come from the binary's build info.
var (
	version = ""
	commit  = ""
	date    = ""
)

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
		Long: `Print the release, the commit and its time, and the Go toolchain.

The release and commit are those set at link time (-ldflags -X main.version,
main.commit, main.date: release builds and deploy/Dockerfile), else the
module version of "go install ...@version" and the VCS stamp "go build" writes
in a git checkout (vcs.revision, vcs.time, vcs.modified). "go run" and
-buildvcs=false record no commit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			fmt.Fprintln(e.stdout, versionLine(bi, version, commit, date))
			return nil
		},
	}
}

// releaseVersion is the release this binary reports (service.version of its
// traces): the link-time version, else the module version, else "dev".
func releaseVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionLine is what "streamgate version" prints: the link-time values
// when set, else what bi (nil: none) recorded.
func versionLine(bi *debug.BuildInfo, ldVersion, ldCommit, ldDate string) string {
	v, rev, at, dirty := ldVersion, ldCommit, ldDate, false
	if bi != nil {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version // go install module@version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				if at == "" {
					at = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true" && ldCommit == ""
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	var b strings.Builder
	b.WriteString("streamgate " + v + " (")
	switch {
	case rev != "":
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString("commit " + rev)
		if at != "" {
			b.WriteString(" of " + at)
		}
		if dirty {
			b.WriteString(", with uncommitted changes")
		}
	case strings.Count(v, "-") >= 2 && strings.HasPrefix(v, "v"):
		// A pseudo-version (v0.0.0-20260102150405-abcdef123456) names its commit.
		b.WriteString("commit " + v[strings.LastIndexByte(v, '-')+1:])
	case v != "dev":
		// A tagged module version is its own commit reference.
	default:
		b.WriteString("no commit recorded: built with go run or -buildvcs=false; go build in a git checkout records it")
	}
	if b.String()[b.Len()-1] != '(' {
		b.WriteString(", ")
	}
	b.WriteString(runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")")
	return b.String()
}
