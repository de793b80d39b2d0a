"""druto against PyTorch's strongest modes, interleaved, same timing, same tokens (druto issue 37).

    python3 compare.py --druto build/gpu/druto --tokens SHARD --out compare-gpt2-124M.json [--config gpt2-124M]
        [--rounds 3] [--druto-modes fused+bf16+graph,fused+bf16] [--modes a,b,c] [--steps 20] [--warmup 5]
        [--floor floor.jsonl] [--jsonl torch.jsonl]

Every PyTorch mode (torch_gpt_bench.build) is built and warmed up ONCE (compilation, autotuning and graph
capture happen there, before round 1), then each round runs `druto bench` (a process of its own, on the same
token shard) and times every PyTorch mode, the side that goes first alternating between rounds. Both sides
time each step with CUDA events (druto: Record.timing "events per step"; PyTorch: events around each step, the
input copies included) and report the median of --steps steps after --warmup. The result file (rewritten
after every round, atomically, so a run cut short keeps its finished rounds) holds both sides' records per
round, the versions (revision, driver, torch, CUDA, cuDNN, the SDPA backend each mode pinned and the one
PyTorch picks), and a summary: per mode the median over rounds of the per-round medians and their spread
(min..max over rounds); each side's best mode; the lead; whether the spreads overlap; the floor, if given.
DEV=cpu runs it on the CPU (druto --backend cpu, host clocks): a check of the harness, not a measurement.
"""
import argparse, datetime, json, os, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch_gpt_bench as tb  # noqa: E402

# druto preset -> (PyTorch config name, druto batch x seq, steps by default)
CONFIGS = {"gpt2-124M": ("gpt2-124M-B16-T1024", "16x1024", 20), "small": ("small-d256-L4-B32-T256", "32x256", 50),
           "tiny": ("tiny-d128-L4-B8-T128", "8x128", 50)}
# The cheapest to build first: a mode whose build would start after --build-budget is left out, and one
# still building when the budget runs out is cut (SIGALRM; both said so), so that a slow autotuning leaves
# the rounds of the modes already built.
STRONGEST = "bf16-cudnn-eager-wholegraph,bf16-cudnn-compile,bf16-cudnn-compile-maxautotune"
T0 = time.time()


class BuildCut(Exception):
    """A PyTorch mode's build ran past --build-budget."""


def build_cut(signum, frame):
    raise BuildCut()


def device_ok():
    """Whether the device still runs work after a build was cut (it may have been cut inside a graph capture)."""
    if not DEV_IS_CUDA():
        return True
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def log(**kw):
    print(json.dumps(kw), flush=True)


def save(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)


def driver_version():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as ex:  # no nvidia-smi (the CPU check)
        return "unknown (%s)" % ex


def summarize(per_round):
    """per_round: {mode: [record per round]} -> {mode: summary}, each side's records with step_ms."""
    out = {}
    for mode, rs in per_round.items():
        ms = sorted(r["step_ms"] for r in rs)
        if not ms:
            continue
        out[mode] = dict(rounds=len(ms), step_ms_median=ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2,
                         step_ms_round_min=ms[0], step_ms_round_max=ms[-1],
                         step_ms_step_min=min(r["step_ms_min"] for r in rs), step_ms_step_max=max(r["step_ms_max"] for r in rs),
                         timing=sorted({r.get("timing", "?") for r in rs}))
    return out


def best(summary):
    return min(summary.items(), key=lambda kv: kv[1]["step_ms_median"]) if summary else (None, None)


def druto_round(a, cfg, shape, steps, path):
    cmd = [a.druto, "bench", "--backend", "gpu" if tb.DEV == "cuda" else "cpu", "--configs", f"{cfg}:{shape}",
           "--modes", a.druto_modes, "--steps", str(steps), "--warmup", str(a.warmup), "--data", a.tokens, "--json", path]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.druto_timeout)
    sys.stderr.write(p.stderr[-4000:])
    if p.returncode != 0:
        return None, dict(error=f"druto bench exit {p.returncode}: {p.stderr.strip()[-300:]}", cmd=" ".join(cmd))
    with open(path) as fh:
        rep = json.load(fh)
    return rep, dict(cmd=" ".join(cmd), wall_s=time.time() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--druto", required=True)
    ap.add_argument("--tokens", required=True, help="llm.c token shard both sides train on")
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="gpt2-124M", choices=sorted(CONFIGS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--druto-modes", default="fused+bf16+graph,fused+bf16")
    ap.add_argument("--modes", default=STRONGEST, help="PyTorch modes (torch_gpt_bench.MODES), comma-separated")
    ap.add_argument("--steps", type=int, default=0, help="timed steps a round (0: 20 for gpt2-124M, 50 for small and tiny)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--floor", default="", help="gemm_floor.py's JSON lines, to put the floor beside the result")
    ap.add_argument("--jsonl", default="", help="also append PyTorch's records here as JSON lines")
    ap.add_argument("--druto-timeout", type=int, default=240)
    ap.add_argument("--profile", type=int, default=1,
                    help="1: after the rounds, where each side's best mode spends its step (druto bench --profile; "
                         "torch.profiler's kernels), when --deadline leaves 40 s")
    ap.add_argument("--build-budget", type=float, default=300,
                    help="seconds from the start after which no PyTorch mode is built: none starts, and one "
                         "still building is cut")
    ap.add_argument("--deadline", type=float, default=400,
                    help="seconds from the start by which the last round must end (a round that would not is left out)")
    a = ap.parse_args()
    if a.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tcfg, shape, steps = CONFIGS[a.config]
    steps = a.steps or steps
    os.environ["TOKENS"] = a.tokens
    if a.jsonl:
        os.environ["JSONL"] = a.jsonl
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rev = os.environ.get("REVISION", "unknown")
    head = dict(what="druto against PyTorch, interleaved rounds, same token shard, CUDA events per step",
                config=a.config, torch_config=tcfg, batch_x_seq=shape, rounds=a.rounds, steps=steps, warmup=a.warmup,
                tokens=a.tokens, revision=rev, time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                gpu_driver=driver_version(), torch=torch.__version__, cuda=torch.version.cuda,
                cudnn=torch.backends.cudnn.version() if DEV_IS_CUDA() else None,
                gpu=torch.cuda.get_device_name() if DEV_IS_CUDA() else "cpu", device=tb.DEV,
                druto_modes=a.druto_modes.split(","), torch_modes=[m for m in a.modes.split(",") if m])
    log(**head)
    res = dict(header=head, druto=[], torch=[], errors=[], builds=[])
    c = tb.CONFIGS[tcfg]
    data = tb.batches(c)
    built = {}
    for mode in head["torch_modes"]:  # build and warm up each mode once: compilation happens here
        t0 = time.time()
        if t0 - T0 > a.build_budget:
            res["errors"].append(dict(side="torch", mode=mode, stage="build",
                                      error=f"left out: {t0 - T0:.0f} s gone, past --build-budget {a.build_budget:.0f} s"))
            log(build=mode, skipped="past --build-budget")
            continue
        cut = False
        try:
            signal.signal(signal.SIGALRM, build_cut)
            signal.setitimer(signal.ITIMER_REAL, max(0.001, a.build_budget - (t0 - T0)))
            if DEV_IS_CUDA():
                torch.cuda.reset_peak_memory_stats()
            step_fn, m, _, backend = tb.build(c, mode)
            for i in range(a.warmup):
                step_fn(*data[i % len(data)])
            if DEV_IS_CUDA():
                torch.cuda.synchronize()
            signal.setitimer(signal.ITIMER_REAL, 0)
            peak_all = torch.cuda.max_memory_allocated() / 2**30 if DEV_IS_CUDA() else 0.0
            built[mode] = (step_fn, sum(p.numel() for p in m.parameters()), backend, time.time() - t0, peak_all)
            res["builds"].append(dict(mode=mode, build_and_warmup_s=time.time() - t0))
        except BuildCut:
            cut = True
            res["errors"].append(dict(side="torch", mode=mode, stage="build",
                                      error=f"cut after {time.time() - t0:.0f} s: --build-budget {a.build_budget:.0f} s ran out"))
        except Exception as ex:  # report and go on without the mode
            res["errors"].append(dict(side="torch", mode=mode, stage="build", error=str(ex)[:400]))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        log(build=mode, seconds=time.time() - t0, ok=mode in built, **({"cut": "--build-budget ran out"} if cut else {}))
        if cut and not device_ok():
            res["errors"].append(dict(side="torch", stage="build", error="the device is unusable after the cut: no further build"))
            break
    floor = []
    if a.floor and os.path.exists(a.floor):
        with open(a.floor) as fh:
            floor = [json.loads(l) for l in fh if l.strip().startswith("{")]
    res["floor"] = floor
    save(a.out, res)  # the builds, in case no round finishes
    last_round = 0.0
    for rnd in range(a.rounds):
        if rnd > 0 and time.time() - T0 + 1.2 * last_round > a.deadline:
            res["errors"].append(dict(stage="rounds", error=f"stopped after {rnd} rounds: another ({last_round:.0f} s) "
                                      f"would end past --deadline {a.deadline:.0f} s"))
            log(stopped_after_rounds=rnd)
            break
        t_round = time.time()
        def torch_side():
            for mode, (step_fn, n_params, backend, warm_s, peak_all) in built.items():
                try:
                    if DEV_IS_CUDA():
                        torch.cuda.reset_peak_memory_stats()
                    ts, loss = tb.time_steps(lambda i: step_fn(*data[i % len(data)]), steps)
                    r = tb.record(tcfg, mode, rnd, ts, loss, n_params, backend, warm_s, peak_all)
                    r["peak_mem_note"] = "process-wide: every built mode's model, optimizer and graphs are alive"
                    tb.emit(r)
                    res["torch"].append(r)
                except Exception as ex:
                    res["errors"].append(dict(side="torch", mode=mode, round=rnd, error=str(ex)[:400]))

        def druto_side():
            rep, info = druto_round(a, a.config, shape, steps, os.path.splitext(a.out)[0] + f"-druto-r{rnd}.json")
            if rep is None:
                res["errors"].append(dict(side="druto", round=rnd, **info))
                return
            for r in rep.get("records", []):
                r = dict(r, round=rnd)
                r.pop("util", None)
                r.pop("profile", None)
                res["druto"].append(r)
                log(round=rnd, side="druto", mode=r["mode"], step_ms=r["step_ms"], timing=r.get("timing"))
            res.setdefault("druto_reports", []).append({k: v for k, v in rep.items() if k != "records"} | info)

        for side in ((druto_side, torch_side) if rnd % 2 == 0 else (torch_side, druto_side)):
            side()
        res["summary"] = summary(res, floor)
        res["header"]["elapsed_s"] = time.time() - T0
        save(a.out, res)
        last_round = time.time() - t_round
    if a.profile and res.get("summary") and time.time() - T0 < a.deadline - 40:
        profiles(a, res, built, data, shape)
        save(a.out, res)
    s = res.get("summary", {})
    log(summary=s)
    print_table(s)


def profiles(a, res, built, data, shape):
    """Where each side's best mode spends its step: druto's graph-aware profile (druto bench --profile, op
    classes) and PyTorch's kernels by device time under torch.profiler (3 steps; kernels replayed inside a CUDA
    graph are listed where this PyTorch's profiler sees them)."""
    s = res["summary"]
    out = res.setdefault("profiles", {})
    if s.get("druto_best"):
        path = os.path.splitext(a.out)[0] + "-druto-profile.json"
        cmd = [a.druto, "bench", "--backend", "gpu" if DEV_IS_CUDA() else "cpu", "--configs", f"{a.config}:{shape}",
               "--modes", s["druto_best"], "--steps", "3", "--warmup", "2", "--profile", "--data", a.tokens, "--json", path]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.druto_timeout)
            if p.returncode == 0:
                with open(path) as fh:
                    out["druto"] = [r.get("profile") for r in json.load(fh).get("records", [])]
                print(p.stdout, flush=True)
            else:
                out["druto_error"] = p.stderr.strip()[-300:]
        except Exception as ex:
            out["druto_error"] = str(ex)[:300]
    if s.get("torch_best") in built:
        try:
            from torch.profiler import profile, ProfilerActivity
            step_fn = built[s["torch_best"]][0]
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV_IS_CUDA() else [])
            with profile(activities=acts) as prof:
                for i in range(3):
                    step_fn(*data[i % len(data)])
                if DEV_IS_CUDA():
                    torch.cuda.synchronize()
            def dev_us(e):
                return getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0) or 0
            evs = sorted(prof.key_averages(), key=dev_us, reverse=True)
            out["torch"] = dict(mode=s["torch_best"], steps=3, total_device_ms_per_step=sum(dev_us(e) for e in evs) / 1e3 / 3,
                                kernels=[dict(name=e.key[:120], ms_per_step=dev_us(e) / 1e3 / 3, calls_per_step=e.count / 3)
                                         for e in evs[:25] if dev_us(e) > 0])
            for k in out["torch"]["kernels"][:12]:
                log(torch_kernel=k["name"], ms_per_step=round(k["ms_per_step"], 3))
        except Exception as ex:
            out["torch_error"] = str(ex)[:300]


def DEV_IS_CUDA():
    return tb.DEV == "cuda"


def summary(res, floor):
    dr = {}
    for r in res["druto"]:
        dr.setdefault(r["mode"], []).append(r)
    tr = {}
    for r in res["torch"]:
        tr.setdefault(r["mode"], []).append(r)
    ds, ts = summarize(dr), summarize(tr)
    (dm, d), (tm, t) = best(ds), best(ts)
    out = dict(druto=ds, torch=ts, druto_best=dm, torch_best=tm)
    if d and t:
        out.update(lead_pct=100 * (t["step_ms_median"] / d["step_ms_median"] - 1),
                   spreads_overlap=not (d["step_ms_round_max"] < t["step_ms_round_min"] or t["step_ms_round_max"] < d["step_ms_round_min"]),
                   verdict="druto ahead" if d["step_ms_median"] < t["step_ms_median"] else "PyTorch ahead")
    fl = [x for x in floor if x.get("summary")]
    if fl and fl[-1].get("floor_ms") and d:
        out.update(floor_ms=fl[-1]["floor_ms"], floor_backend=fl[-1].get("floor_backend"),
                   druto_over_floor_pct=100 * (d["step_ms_median"] / fl[-1]["floor_ms"] - 1))
        if t:
            out["torch_over_floor_pct"] = 100 * (t["step_ms_median"] / fl[-1]["floor_ms"] - 1)
    return out


def print_table(s):
    print("\n%-7s %-34s %10s %21s %21s" % ("side", "mode", "median ms", "rounds min..max", "steps min..max"))
    for side in ("druto", "torch"):
        for mode, x in sorted(s.get(side, {}).items(), key=lambda kv: kv[1]["step_ms_median"]):
            print("%-7s %-34s %10.3f %10.3f..%-10.3f %10.3f..%-10.3f" % (side, mode, x["step_ms_median"], x["step_ms_round_min"],
                  x["step_ms_round_max"], x["step_ms_step_min"], x["step_ms_step_max"]))
    if "lead_pct" in s:
        print(f"\nbest: druto {s['druto_best']} vs PyTorch {s['torch_best']}: {s['verdict']}, PyTorch/druto - 1 = {s['lead_pct']:+.2f}%,"
              f" round spreads {'overlap' if s['spreads_overlap'] else 'do not overlap'}")
    if "floor_ms" in s:
        print(f"floor ({s['floor_backend']} attention, one graph of the step's GEMMs and attention): {s['floor_ms']:.2f} ms;"
              f" druto {s['druto_over_floor_pct']:+.1f}% above it")


def losscurve_summary(folder, out):
    """The final validation losses of gpt-bench.sh losscurve's metrics files (losscurve-{druto,torch}-seedN.jsonl
    in folder), per seed and their means, and how far apart the two sides end (target: within 1%)."""
    import glob, re
    res = dict(what="final validation loss, druto train bf16 against PyTorch, same shard, same recipe",
               revision=os.environ.get("REVISION", "unknown"),
               time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), seeds={})
    for path in sorted(glob.glob(os.path.join(folder, "losscurve-*-seed*.jsonl"))):
        side, seed = re.match(r".*losscurve-(druto|torch)-seed(\d+)\.jsonl$", path).groups()
        last = None
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    if r.get("val_loss") is not None and "event" not in r:
                        last = r
        if last:
            res["seeds"].setdefault(seed, {})[side] = dict(step=last["step"], val_loss=last["val_loss"], loss=last.get("loss"))
    torch_runs = os.path.join(folder, "losscurve-torch.jsonl")
    if os.path.exists(torch_runs):
        with open(torch_runs) as fh:
            res["torch_runs"] = [json.loads(l) for l in fh if l.strip()]
    pairs = [v for v in res["seeds"].values() if "druto" in v and "torch" in v]
    if pairs:
        d = sum(v["druto"]["val_loss"] for v in pairs) / len(pairs)
        t = sum(v["torch"]["val_loss"] for v in pairs) / len(pairs)
        res.update(seeds_compared=len(pairs), druto_final_val_loss=d, torch_final_val_loss=t,
                   diff_pct=100 * (d - t) / t, within_1pct=abs(d - t) <= 0.01 * t)
        print(f"final validation loss over {len(pairs)} seed(s): druto {d:.4f}, PyTorch {t:.4f}, "
              f"druto/PyTorch - 1 = {100 * (d - t) / t:+.2f}% ({'within' if abs(d - t) <= 0.01 * t else 'NOT within'} 1%)")
    else:
        print("final validation loss: no seed with both sides' metrics (see the log above)")
    save(out, res)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--losscurve"]:
        ap = argparse.ArgumentParser(description="losscurve summary")
        ap.add_argument("--losscurve", required=True, help="folder with losscurve-{druto,torch}-seedN.jsonl")
        ap.add_argument("--out", required=True)
        a = ap.parse_args()
        losscurve_summary(a.losscurve, a.out)
    else:
        main()
