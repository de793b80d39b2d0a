package dist

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the torchrun convention, and druto's own.
const (
	EnvRank       = "RANK"               // this process's rank, 0 <= RANK < WORLD_SIZE
	EnvWorldSize  = "WORLD_SIZE"         // the number of ranks
	EnvLocalRank  = "LOCAL_RANK"         // the rank among the processes of this host (the GPU it uses)
	EnvLocalWorld = "LOCAL_WORLD_SIZE"   // the number of processes on this host (optional)
	EnvMasterAddr = "MASTER_ADDR"        // host name or address of rank 0
	EnvMasterPort = "MASTER_PORT"        // TCP port rank 0 listens on for the rendezvous
	EnvTimeout    = "DRUTO_DIST_TIMEOUT" // rendezvous timeout, a Go duration such as "90s" (optional)
)

// Config is one process's place in data-parallel training.
type Config struct {
	Rank       int    // 0 <= Rank < World
	World      int    // number of ranks, >= 1
	LocalRank  int    // rank on this host, 0 <= LocalRank < LocalWorld (when known)
	LocalWorld int    // processes on this host; 0 when the launcher did not say
	MasterAddr string // host or address of rank 0
	MasterPort int    // rank 0's rendezvous port, 1..65535
	// Timeout bounds the rendezvous and every barrier (0: DefaultTimeout).
	Timeout time.Duration
}

// DefaultTimeout is how long the rendezvous waits for every rank.
const DefaultTimeout = 5 * time.Minute

// FromEnv reads the configuration from the environment. ok is false (and
// err nil) when neither RANK nor WORLD_SIZE is set: the process is not a
// rank of data-parallel training.
func FromEnv() (cfg Config, ok bool, err error) { return ParseEnv(os.LookupEnv) }

// ParseEnv is FromEnv with the environment read through lookup. Every
// variable must be a plain integer (ports and ranks); RANK and WORLD_SIZE
// come together; LOCAL_RANK, MASTER_ADDR and MASTER_PORT are required when
// WORLD_SIZE is above 1. The errors name the variable and what to set.
func ParseEnv(lookup func(string) (string, bool)) (cfg Config, ok bool, err error) {
	rank, hasRank := lookup(EnvRank)
	world, hasWorld := lookup(EnvWorldSize)
	if !hasRank && !hasWorld {
		return Config{Rank: 0, World: 1}, false, nil
	}
	const together = "a launcher sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT together"
	if !hasRank {
		return cfg, false, fmt.Errorf("dist: %s is set but %s is not (%s)", EnvWorldSize, EnvRank, together)
	}
	if !hasWorld {
		return cfg, false, fmt.Errorf("dist: %s is set but %s is not (%s)", EnvRank, EnvWorldSize, together)
	}
	if cfg.Rank, err = envInt(EnvRank, rank); err != nil {
		return cfg, false, err
	}
	if cfg.World, err = envInt(EnvWorldSize, world); err != nil {
		return cfg, false, err
	}
	if cfg.World < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.World { // say so before asking for the rest
		return cfg, false, Config{Rank: cfg.Rank, World: cfg.World}.Validate()
	}
	need := cfg.World > 1
	if v, has := lookup(EnvLocalRank); has {
		if cfg.LocalRank, err = envInt(EnvLocalRank, v); err != nil {
			return cfg, false, err
		}
	} else if need {
		return cfg, false, fmt.Errorf("dist: %s is not set (%s)", EnvLocalRank, together)
	}
	if v, has := lookup(EnvLocalWorld); has && v != "" {
		if cfg.LocalWorld, err = envInt(EnvLocalWorld, v); err != nil {
			return cfg, false, err
		}
	}
	if v, has := lookup(EnvMasterAddr); has {
		cfg.MasterAddr = strings.TrimSpace(v)
	}
	if v, has := lookup(EnvMasterPort); has {
		if cfg.MasterPort, err = envInt(EnvMasterPort, v); err != nil {
			return cfg, false, err
		}
	} else if need {
		return cfg, false, fmt.Errorf("dist: %s is not set (%s)", EnvMasterPort, together)
	}
	if v, has := lookup(EnvTimeout); has && v != "" {
		if cfg.Timeout, err = time.ParseDuration(v); err != nil || cfg.Timeout <= 0 {
			return cfg, false, fmt.Errorf("dist: %s=%q is not a positive duration (e.g. 90s or 10m)", EnvTimeout, v)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, false, err
	}
	return cfg, true, nil
}

func envInt(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("dist: %s=%q is not an integer", name, v)
	}
	return n, nil
}

// Validate reports a configuration that cannot run, naming the variable.
func (c Config) Validate() error {
	switch {
	case c.World < 1:
		return fmt.Errorf("dist: %s=%d must be at least 1", EnvWorldSize, c.World)
	case c.Rank < 0 || c.Rank >= c.World:
		return fmt.Errorf("dist: %s=%d is out of range for %s=%d (want 0 <= %s < %s)", EnvRank, c.Rank, EnvWorldSize, c.World, EnvRank, EnvWorldSize)
	case c.LocalRank < 0 || c.LocalRank >= c.World:
		return fmt.Errorf("dist: %s=%d is out of range for %s=%d (the ranks of a host are some of all the ranks)", EnvLocalRank, c.LocalRank, EnvWorldSize, c.World)
	case c.LocalWorld < 0 || c.LocalWorld > c.World:
		return fmt.Errorf("dist: %s=%d must be in [1, %s=%d]", EnvLocalWorld, c.LocalWorld, EnvWorldSize, c.World)
	case c.LocalWorld > 0 && c.LocalRank >= c.LocalWorld:
		return fmt.Errorf("dist: %s=%d is out of range for %s=%d", EnvLocalRank, c.LocalRank, EnvLocalWorld, c.LocalWorld)
	case c.Timeout < 0:
		return fmt.Errorf("dist: negative timeout %v", c.Timeout)
	}
	if c.World == 1 {
		return nil
	}
	if c.MasterAddr == "" {
		return fmt.Errorf("dist: %s is empty or not set: give the host name or address of rank 0", EnvMasterAddr)
	}
	if c.MasterPort < 1 || c.MasterPort > 65535 {
		return fmt.Errorf("dist: %s=%d is not a TCP port (1-65535)", EnvMasterPort, c.MasterPort)
	}
	return nil
}

// Master returns rank 0's rendezvous address, host:port.
func (c Config) Master() string {
	return net.JoinHostPort(c.MasterAddr, strconv.Itoa(c.MasterPort))
}

// Env returns the variables that give a child process this configuration,
// as "NAME=value" (for exec.Cmd.Env).
func (c Config) Env() []string {
	env := []string{
		EnvRank + "=" + strconv.Itoa(c.Rank),
		EnvWorldSize + "=" + strconv.Itoa(c.World),
		EnvLocalRank + "=" + strconv.Itoa(c.LocalRank),
		EnvMasterAddr + "=" + c.MasterAddr,
		EnvMasterPort + "=" + strconv.Itoa(c.MasterPort),
	}
	if c.LocalWorld > 0 {
		env = append(env, EnvLocalWorld+"="+strconv.Itoa(c.LocalWorld))
	}
	if c.Timeout > 0 {
		env = append(env, EnvTimeout+"="+c.Timeout.String())
	}
	return env
}

// String describes the rank, e.g. "rank 1 of 2 (local 1 of 2), rank 0 at 127.0.0.1:29500".
func (c Config) String() string {
	local := fmt.Sprintf("local %d", c.LocalRank)
	if c.LocalWorld > 0 {
		local += fmt.Sprintf(" of %d", c.LocalWorld)
	}
	s := fmt.Sprintf("rank %d of %d (%s)", c.Rank, c.World, local)
	if c.World > 1 {
		s += ", rank 0 at " + c.Master()
	}
	return s
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}
