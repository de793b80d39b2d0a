package dist

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseEnv(t *testing.T) {
	// Not a rank: nothing set.
	cfg, ok, err := ParseEnv(env(nil))
	if ok || err != nil || cfg.World != 1 || cfg.Rank != 0 {
		t.Fatalf("empty environment: %+v %v %v", cfg, ok, err)
	}
	full := map[string]string{
		"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "node0.example", "MASTER_PORT": "29500", "DRUTO_DIST_TIMEOUT": "90s",
	}
	cfg, ok, err = ParseEnv(env(full))
	want := Config{Rank: 3, World: 4, LocalRank: 1, LocalWorld: 2, MasterAddr: "node0.example", MasterPort: 29500, Timeout: 90 * time.Second}
	if !ok || err != nil || cfg != want {
		t.Fatalf("got %+v %v %v, want %+v", cfg, ok, err, want)
	}
	if cfg.Master() != "node0.example:29500" {
		t.Fatalf("master %q", cfg.Master())
	}
	// Env round-trips through ParseEnv.
	back := map[string]string{}
	for _, kv := range cfg.Env() {
		k, v, _ := strings.Cut(kv, "=")
		back[k] = v
	}
	if again, ok, err := ParseEnv(env(back)); !ok || err != nil || again != cfg {
		t.Fatalf("Env round trip: %+v %v %v from %v", again, ok, err, cfg.Env())
	}
	if s := cfg.String(); !strings.Contains(s, "rank 3 of 4") || !strings.Contains(s, "node0.example:29500") {
		t.Fatalf("String %q", s)
	}
	// IPv6 master addresses are bracketed.
	if c := (Config{MasterAddr: "::1", MasterPort: 7}); c.Master() != "[::1]:7" {
		t.Fatalf("IPv6 master %q", c.Master())
	}
	// A world of one needs no master.
	cfg, ok, err = ParseEnv(env(map[string]string{"RANK": "0", "WORLD_SIZE": "1"}))
	if !ok || err != nil || cfg.World != 1 {
		t.Fatalf("world of one: %+v %v %v", cfg, ok, err)
	}

	bad := func(change map[string]string, drop string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for k, v := range change {
			m[k] = v
		}
		delete(m, drop)
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // every word must be in the error
	}{
		{"rank without world", bad(nil, "WORLD_SIZE"), []string{"RANK is set but WORLD_SIZE is not"}},
		{"world without rank", bad(nil, "RANK"), []string{"WORLD_SIZE is set but RANK is not"}},
		{"rank not a number", bad(map[string]string{"RANK": "one"}, ""), []string{`RANK="one"`, "not an integer"}},
		{"rank out of range", bad(map[string]string{"RANK": "4"}, ""), []string{"RANK=4", "out of range", "WORLD_SIZE=4"}},
		{"negative rank", bad(map[string]string{"RANK": "-1"}, ""), []string{"RANK=-1"}},
		{"zero world", bad(map[string]string{"WORLD_SIZE": "0", "RANK": "0"}, ""), []string{"WORLD_SIZE=0", "at least 1"}},
		{"no local rank", bad(nil, "LOCAL_RANK"), []string{"LOCAL_RANK is not set"}},
		{"local rank past local world", bad(map[string]string{"LOCAL_RANK": "2"}, ""), []string{"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"}},
		{"local world past world", bad(map[string]string{"LOCAL_WORLD_SIZE": "5"}, ""), []string{"LOCAL_WORLD_SIZE=5"}},
		{"no master addr", bad(nil, "MASTER_ADDR"), []string{"MASTER_ADDR", "rank 0"}},
		{"empty master addr", bad(map[string]string{"MASTER_ADDR": " "}, ""), []string{"MASTER_ADDR"}},
		{"no master port", bad(nil, "MASTER_PORT"), []string{"MASTER_PORT is not set"}},
		{"port not a number", bad(map[string]string{"MASTER_PORT": "http"}, ""), []string{`MASTER_PORT="http"`}},
		{"port out of range", bad(map[string]string{"MASTER_PORT": "70000"}, ""), []string{"MASTER_PORT=70000", "1-65535"}},
		{"bad timeout", bad(map[string]string{"DRUTO_DIST_TIMEOUT": "soon"}, ""), []string{"DRUTO_DIST_TIMEOUT", "duration"}},
	} {
		_, ok, err := ParseEnv(env(tc.env))
		if err == nil || ok {
			t.Errorf("%s: accepted (%v)", tc.name, ok)
			continue
		}
		if !strings.HasPrefix(err.Error(), "dist: ") {
			t.Errorf("%s: %q lacks the package prefix", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestConfigEnvOmitsUnknowns(t *testing.T) {
	c := Config{Rank: 1, World: 2, LocalRank: 1, MasterAddr: "127.0.0.1", MasterPort: 1234}
	want := []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1234"}
	if got := c.Env(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Env %q, want %q", got, want)
	}
}
