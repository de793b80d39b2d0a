package main

// dist.go: data-parallel training from the command line (package dist).
//
//	druto train --ranks N ...   N CPU rank processes on this host
//	druto train --gpus N ...    N GPU rank processes, one GPU each
//
// --batch is per rank: N ranks of --batch B train on global batches of N·B,
// as one process of --batch N·B would. Without RANK in the environment,
// druto is the launcher: it starts N children of its own binary with the
// same arguments and RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR (127.0.0.1) and MASTER_PORT (a free port, or $MASTER_PORT)
// set, prefixes their output with "[rank r] ", forwards interrupts to them
// and fails when any fails, stopping the others. With RANK set (by druto or
// by torchrun, Slurm, Kubernetes...), druto is one rank: it joins the
// rendezvous and trains with the ring reducer (CPU) or NCCL (GPU). Only rank
// 0 writes checkpoints and metrics, evaluates and samples.
//
// A GPU rank uses the GPU numbered LOCAL_RANK: it narrows CUDA_VISIBLE_DEVICES
// to that GPU before CUDA starts (druto.Open opens device 0), or keeps a
// single GPU a launcher already bound it to. NCCL reaches the other GPUs over
// NVLink all the same (P2P with devices invisible to the process works since
// CUDA 10.1). NCCL_NVLS_ENABLE is set to 0 unless set.

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/dist"
	"github.com/druto/druto/pkg/train"
)

// dataParallel holds the flags of data-parallel training.
type dataParallel struct {
	fs      *flag.FlagSet
	ranks   *int
	gpus    *int
	local   int  // rank processes of this host, set by setup in a rank (0: not a rank)
	counted bool // the launcher's --gpus was checked against the GPUs of the host
}

// distFlags adds --ranks and --gpus to fs.
func distFlags(fs *flag.FlagSet) *dataParallel {
	return &dataParallel{
		fs:    fs,
		ranks: fs.Int("ranks", 0, "data-parallel training over N CPU processes of this host (--batch is per rank)"),
		gpus:  fs.Int("gpus", 0, "data-parallel training over N GPUs of this host, one process each (--batch is per GPU)"),
	}
}

// setup runs after the flags are parsed and opts validated. As the
// launcher (--ranks or --gpus above 1, no RANK in the environment) it runs
// the ranks and returns done. As a rank it chooses the backend, joins the
// rendezvous and sets opts.Reducer (rank 0 keeps the outputs). Without
// either it changes nothing.
func (d *dataParallel) setup(be *backend, opts *train.Options, args []string) (done bool, err error) {
	n, gpus, err := d.count()
	if err != nil {
		return false, err
	}
	cfg, isRank, err := dist.FromEnv()
	if err != nil {
		return false, err
	}
	if !isRank {
		if n == 0 {
			return false, nil
		}
		if err := forceBackend(be, gpus); err != nil {
			return false, err
		}
		if n == 1 { // one rank: an ordinary run on the backend asked for
			return false, nil
		}
		return true, launch(args, n, gpus)
	}
	d.local = cmp.Or(cfg.LocalWorld, n)
	return false, joinRank(cfg, be, opts, n, gpus)
}

// count returns the number of local ranks asked for and whether they are GPUs.
func (d *dataParallel) count() (int, bool, error) {
	r, g := *d.ranks, *d.gpus
	switch {
	case r < 0 || g < 0:
		return 0, false, fmt.Errorf("--ranks %d and --gpus %d must not be negative", r, g)
	case r > 0 && g > 0:
		return 0, false, errors.New("--ranks (CPU processes) and --gpus (GPU processes) exclude each other")
	case r > maxRanks():
		return 0, false, inRange("ranks", r, 0, maxRanks(), fmt.Sprintf("each rank is a process with its own copy of the model, and this host has %d cores (4 ranks a core at most)", runtime.NumCPU()))
	case g == 0 && d.given("gpus"):
		return 0, false, errors.New("--gpus 0: give the number of GPUs to train on (1 or more), or leave out --gpus to train in one process")
	case g > 0:
		// The launcher (no RANK set) checks the host's GPUs before anything
		// is loaded; a rank's own launcher chose its GPU (see bindGPU).
		if _, isRank := os.LookupEnv(dist.EnvRank); !isRank && !d.counted {
			if err := haveGPUs(g); err != nil {
				return 0, false, err
			}
			d.counted = true
		}
		return g, true, nil
	}
	return r, false, nil
}

// given says whether the flag name was set on the command line.
func (d *dataParallel) given(name string) bool {
	set := false
	if d.fs != nil {
		d.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}

// maxRanks bounds --ranks: 4 processes a core.
func maxRanks() int { return 4 * runtime.NumCPU() }

// forceBackend sets --backend to gpu or cpu, refusing the other one.
func forceBackend(be *backend, gpus bool) error {
	want, flagName := "cpu", "--ranks"
	if gpus {
		want, flagName = "gpu", "--gpus"
	}
	if b := *be.name; b != "auto" && b != "" && b != want {
		return fmt.Errorf("%s runs on the %s backend, not --backend %s (use --ranks for CPUs, --gpus for GPUs)", flagName, want, b)
	}
	*be.name = want
	return nil
}

// launch starts n local ranks of this binary with the same arguments.
func launch(args []string, n int, gpus bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find druto's own binary to start the ranks: %w", err)
	}
	port := 0
	if v := os.Getenv(dist.EnvMasterPort); v != "" {
		if port, err = strconv.Atoi(v); err != nil || port < 1 || port > 65535 {
			return fmt.Errorf("%s=%q is not a TCP port", dist.EnvMasterPort, v)
		}
	} else if port, err = freePort(); err != nil {
		return err
	}
	envs := make([][]string, n)
	base := cleanEnv(os.Environ())
	for r := range n {
		cfg := dist.Config{Rank: r, World: n, LocalRank: r, LocalWorld: n, MasterAddr: "127.0.0.1", MasterPort: port}
		envs[r] = append(append([]string(nil), base...), cfg.Env()...)
		if _, set := os.LookupEnv(gpu.EnvNCCLNVLS); gpus && !set {
			envs[r] = append(envs[r], gpu.EnvNCCLNVLS+"=0")
		}
	}
	kind := "CPU"
	if gpus {
		kind = "GPU"
	}
	fmt.Fprintf(os.Stderr, "druto: starting %d %s ranks (rank 0 at 127.0.0.1:%d)\n", n, kind, port)
	return launchRanks(exe, append([]string{"train"}, args...), envs, os.Stdout, os.Stderr)
}

// haveGPUs checks that the driver sees at least n GPUs (CUDA_VISIBLE_DEVICES
// counts), so that a short host (or one without a GPU) fails up front,
// once, with the count and what to do.
func haveGPUs(n int) error {
	have, err := gpu.DeviceCount(gpu.LoadOptions{})
	if err == nil && have == 0 {
		err = errors.New("the driver sees none")
	}
	if err != nil {
		return fmt.Errorf("--gpus %d: this machine has no usable GPU (%v); leave out --gpus to train on the CPU, or use --ranks N for N CPU processes", n, err)
	}
	if have < n {
		return fmt.Errorf("--gpus %d is more than the %d GPU(s) this host has visible (CUDA_VISIBLE_DEVICES counts); give --gpus between 1 and %d", n, have, have)
	}
	return nil
}

// freePort asks the kernel for a free TCP port on the loopback.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port for the rendezvous: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv drops the rank variables a parent launcher may have set.
func cleanEnv(env []string) []string {
	drop := map[string]bool{dist.EnvRank: true, dist.EnvWorldSize: true, dist.EnvLocalRank: true,
		dist.EnvLocalWorld: true, dist.EnvMasterAddr: true, dist.EnvMasterPort: true}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}

// launchRanks runs exe args once per entry of envs (rank r gets envs[r]),
// copying each child's stdout and stderr line by line to stdout and stderr
// with a "[rank r] " prefix. Interrupts and SIGTERM are passed on to the
// children. When one fails, the others are killed; the error names the
// first that failed, with its last line of stderr.
func launchRanks(exe string, args []string, envs [][]string, stdout, stderr io.Writer) error {
	n := len(envs)
	var mu sync.Mutex // one line at a time, whichever rank writes it
	cmds := make([]*exec.Cmd, n)
	errw := make([]*prefixWriter, n)
	outw := make([]*prefixWriter, n)
	kill := func(except int) {
		for r, c := range cmds {
			if c != nil && c.Process != nil && r != except {
				_ = c.Process.Kill() // already gone: nothing to do
			}
		}
	}
	for r := range n {
		c := exec.Command(exe, args...)
		c.Env = envs[r]
		prefix := fmt.Sprintf("[rank %d] ", r)
		outw[r] = &prefixWriter{prefix: prefix, w: stdout, mu: &mu}
		errw[r] = &prefixWriter{prefix: prefix, w: stderr, mu: &mu}
		c.Stdout, c.Stderr = outw[r], errw[r]
		c.WaitDelay = 2 * time.Second // a killed child's own children must not hold its output open
		if err := c.Start(); err != nil {
			kill(-1)
			for _, s := range cmds[:r] {
				_ = s.Wait()
			}
			return fmt.Errorf("starting rank %d: %w", r, err)
		}
		cmds[r] = c
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, n)
	for r, c := range cmds {
		go func() { exits <- exit{r, c.Wait()} }()
	}
	first := exit{rank: -1}
	exited := make([]bool, n)
	for left := n; left > 0; {
		select {
		case e := <-exits:
			left--
			exited[e.rank] = true
			if e.err != nil && first.rank < 0 {
				first = e
				kill(e.rank)
			}
		case s := <-sig:
			for r, c := range cmds {
				if !exited[r] {
					_ = c.Process.Signal(s)
				}
			}
		}
	}
	for r := range n {
		outw[r].flush()
		errw[r].flush()
	}
	if first.rank < 0 {
		return nil
	}
	msg := fmt.Sprintf("rank %d failed (%v)", first.rank, first.err)
	if last := errw[first.rank].lastLine(); last != "" {
		msg += ": " + last
	}
	if n > 1 {
		msg += "; the other ranks were stopped"
	}
	return errors.New(msg)
}

// prefixWriter writes whole lines to w, each after prefix, holding mu, and
// remembers the last non-empty line.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     *sync.Mutex
	buf    []byte
	last   string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.line(p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) line(l []byte) {
	l = bytes.TrimRight(l, "\r")
	if s := strings.TrimSpace(string(l)); s != "" {
		p.last = s
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, l)
}

// flush writes a last line that had no newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.line(p.buf)
		p.buf = nil
	}
}

// lastLine returns the last non-empty line written.
func (p *prefixWriter) lastLine() string { return p.last }

// joinRank makes this process one rank of cfg: the backend (n and gpus are
// the flags; without them, --backend says), the rendezvous and the reducer.
func joinRank(cfg dist.Config, be *backend, opts *train.Options, n int, gpus bool) error {
	useGPU := gpus
	switch {
	case n > 0:
		if err := forceBackend(be, gpus); err != nil {
			return err
		}
		if cfg.LocalWorld > 0 && n != cfg.LocalWorld {
			return fmt.Errorf("%s=%d but --%s %d: pass the number of processes of this host", dist.EnvLocalWorld, cfg.LocalWorld, map[bool]string{true: "gpus", false: "ranks"}[gpus], n)
		}
	case *be.name == "gpu":
		useGPU = true
	case *be.name == "cpu":
	default:
		return fmt.Errorf("%s is set (a launcher started this rank): pass --gpus N or --ranks N (N processes on this host), or --backend gpu or cpu, to say whether ranks meet over NCCL or the TCP ring", dist.EnvRank)
	}
	local := cfg.LocalWorld
	if local == 0 {
		local = n
	}
	if useGPU {
		if err := bindGPU(cfg.LocalRank); err != nil {
			return err
		}
	} else if *be.threads == 0 && local > 1 {
		*be.threads = max(1, runtime.NumCPU()/local) // the host's cores shared among its ranks
	}
	if cfg.World == 1 {
		return nil
	}
	plan, err := dist.NewPlan(opts.Config.Layout(), dist.DefaultBucketBytes)
	if err != nil {
		return err
	}
	var r train.Reducer
	kind := "TCP ring"
	if useGPU {
		kind = "NCCL"
		r, err = dist.JoinNCCL(cfg, plan, dist.Options{}, gpu.LoadOptions{})
	} else {
		r, err = dist.JoinRing(cfg, plan, dist.Options{})
	}
	if err != nil {
		return err
	}
	opts.Reducer = r
	if cfg.Rank != 0 { // rank 0 alone writes, evaluates and samples
		opts.OutDir, opts.EvalEvery, opts.SampleTokens = "", 0, 0
	}
	fmt.Fprintf(os.Stderr, "druto: %s, %s all-reduce in %d buckets of up to %d MiB\n", cfg, kind, len(plan.Buckets), dist.DefaultBucketBytes>>20)
	return nil
}

// bindGPU makes the GPU numbered localRank the process's device 0 through
// CUDA_VISIBLE_DEVICES (before CUDA is initialised): entry localRank of the
// list when one is set, the list's only entry when a launcher already bound
// this rank to one GPU.
func bindGPU(localRank int) error {
	const env = "CUDA_VISIBLE_DEVICES"
	v, set := os.LookupEnv(env)
	pick := strconv.Itoa(localRank)
	if set {
		list := strings.Split(v, ",")
		switch {
		case localRank < len(list):
			pick = strings.TrimSpace(list[localRank])
		case len(list) == 1:
			return nil
		default:
			return fmt.Errorf("%s=%d but %s=%q lists %d GPUs", dist.EnvLocalRank, localRank, env, v, len(list))
		}
	}
	if err := os.Setenv(env, pick); err != nil {
		return fmt.Errorf("set %s: %w", env, err)
	}
	return nil
}
