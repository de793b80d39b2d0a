// Command druto trains, samples, evaluates, benchmarks and plots druto's GPT,
// and builds and detects its CUDA kernels. Each subcommand lives in its own
// file and registers itself in commands; this file only dispatches.
//
//	druto detect [--json]       what backend druto would use and why
//	druto build                 compile every CUDA kernel for this GPU
//	druto train --preset tiny   train on the built-in corpus (or --data FILE)
//	druto sample --checkpoint F generate text from a checkpoint
//	druto eval --checkpoint F   mean loss of a checkpoint over a data file
//	druto bench                 fused+AMP against the plain baseline
//	druto plot                  render metrics and benchmark records
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: a one-line summary and the function running it.
type command struct {
	summary string
	run     func(args []string) error
}

// commands is filled by each subcommand file's init.
var commands = map[string]command{}

func register(name, summary string, run func(args []string) error) {
	commands[name] = command{summary, run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: druto <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nrun 'druto <command> -h' for its flags")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "druto: unknown command %q; run 'druto help' for the list\n", os.Args[1])
		os.Exit(2)
	}
	if err := cmd.run(os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		// One line: the cause and what to do, never a trace. Exit 2 for a
		// command line that does not parse (as flag's own), 1 otherwise.
		fmt.Fprintln(os.Stderr, "druto "+os.Args[1]+": "+strings.ReplaceAll(err.Error(), "\n", "; "))
		if errors.As(err, new(usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// newFlags returns a flag set that reports errors as values (not exits) so
// that main prints them in the one-line format. Parse it with parseFlags.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("druto "+name, flag.ContinueOnError)
	return fs
}

// inRange returns an error naming --flag when v is outside [lo, hi]; why
// is the reason for hi, said in the message.
func inRange(flag string, v, lo, hi int, why string) error {
	switch {
	case v < lo:
		return fmt.Errorf("--%s %d must be at least %d", flag, v, lo)
	case v > hi:
		return fmt.Errorf("--%s %d is more than %d: %s", flag, v, hi, why)
	}
	return nil
}

// usageError is a command line that does not parse: an unknown flag, a
// value of the wrong type, a stray argument (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// maxThreads bounds --threads.
const maxThreads = 4096

// parseFlags parses args into fs. A bad flag is one line with a pointer to
// --help (not the whole usage text); -h prints the usage. Flags only: a
// stray positional argument is an error. Values every command shares are
// checked here: a float flag must be finite, --threads in [0, maxThreads].
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(os.Stderr)
	help := fmt.Sprintf("run '%s --help' for the flags", fs.Name())
	switch {
	case errors.Is(err, flag.ErrHelp):
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fmt.Fprintf(os.Stderr, "usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return err
	case err != nil:
		return usageError{fmt.Errorf("%v; %s", err, help)}
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q: %s takes flags only (write --name value); %s", fs.Arg(0), fs.Name(), help)}
	}
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		if v, ok := g.Get().(float64); ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("--%s %s must be a finite number", f.Name, f.Value)
		}
		if v, ok := g.Get().(int); ok && f.Name == "threads" && (v < 0 || v > maxThreads) {
			err = fmt.Errorf("--threads %d must be between 0 (all cores) and %d", v, maxThreads)
		}
	})
	return err
}
