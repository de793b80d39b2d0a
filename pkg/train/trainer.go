package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/record"
	"github.com/druto/druto/pkg/tensor"
)

// Options configure a training run. Zero values of the optional fields
// switch the feature off.
type Options struct {
	Config gpt.Config   // model shape (a preset, usually)
	Policy amp.Policy   // fp32, bf16 or fp16
	Batch  int          // B: sequences per micro-batch (per step without Accum)
	Seq    int          // T: tokens per sequence (<= Config.MaxSeq)
	Optim  optim.Config // AdamW, schedule (its Steps is the run's length) and clipping
	Seed   uint64       // initialisation and sampling

	// Tokenizer is what the tokens are (nil: bytes); samples are decoded
	// with it and checkpoints record it, so that sample and eval find it.
	Tokenizer data.Tokenizer

	EvalEvery    int    // evaluate the validation loss every N steps (and at the end)
	EvalBatches  int    // batches per evaluation (0: every whole batch of the validation split)
	SampleEvery  int    // generate a sample every M steps (and at the end)
	SampleTokens int    // tokens per sample
	SamplePrompt string // text to continue

	OutDir          string // checkpoints and metrics.jsonl go here; "" keeps nothing
	CheckpointEvery int    // also checkpoint every N steps (always at the end)
	DataChanged     bool   // Resume accepts a checkpoint trained on other data

	// SaveDType is the dtype the model file stores the weights in: F32 (or
	// 0), or BF16 or F16 for half the size. The optimizer state stays F32;
	// a resume continues from the rounded weights.
	SaveDType tensor.DType

	// Step says where the step's decisions run (StepHost, the zero value;
	// StepDevice; StepGraph). A device that cannot run the asked mode runs
	// the closest one it can, with a Notice saying why.
	Step StepMode
	// LogEvery is how many device-resident steps are queued before the host
	// waits and reads their metrics (0 or 1: every step). Run also waits
	// before evaluations, samples and checkpoints.
	LogEvery int
	// Notice, when set, receives one-line notices (a mode that fell back).
	Notice func(msg string)
	// InjectGrad, for tests, returns a value added on the device to the
	// first gradient element of each 1-based step, after backward and before
	// the norm (an Inf injects a non-finite step, also inside a replayed
	// graph); nil adds nothing.
	InjectGrad func(step int) float32

	// Accum is the number of micro-batches of Batch sequences a step runs
	// forward and backward on (gradient accumulation; 0 or 1: one). A
	// step reads Accum·Batch sequences in the order one batch of that size
	// would; the gradients are summed in fp32 with the loss scaled once (by
	// scale/(Accum·Batch·Seq)), and the norm, the GradScaler (a micro-batch
	// that overflows skips the step), clipping and AdamW run once per step
	// on the sum: the update of one batch of Accum·Batch sequences.
	Accum int
	// Recompute is how much of forward backward computes again instead of
	// keeping (gpt.Recompute); it changes memory and time, not the results.
	Recompute gpt.Recompute
	// FP8 is the scaling recipe of the fp8 policy (gpt.Model.SetFP8Recipe);
	// the zero value means amp.DefaultFP8Recipe.
	FP8 amp.FP8Recipe
	// AdamState is the dtype AdamW keeps its moments in: F32 (0 means
	// F32), or BF16 for half the optimizer state, rounded stochastically
	// (device.MomentsBF16). A checkpoint stores them in their dtype; a
	// resume under the other dtype converts them (bf16 to fp32 exactly,
	// fp32 to bf16 rounded to nearest).
	AdamState tensor.DType

	// Reducer, when set, makes this trainer one rank of data-parallel
	// training: each rank reads its own part of every global batch, and the
	// gradients (and the reported loss) are averaged over ranks before the
	// norm, so clipping and the GradScaler decide the same on every rank.
	Reducer Reducer
}

// Reducer averages across the ranks of data-parallel training (package
// dist implements it over TCP for CPUs and over NCCL for GPUs).
type Reducer interface {
	Rank() int  // this process's rank, 0 <= Rank < World
	World() int // the number of ranks
	// AllReduceMean replaces grads on every rank by the mean over ranks.
	AllReduceMean(dev device.Device, grads *tensor.Tensor) error
	// MeanLoss returns the mean of v over ranks.
	MeanLoss(v float32) (float32, error)
}

// Validate reports options that cannot run, saying what to change.
func (o Options) Validate() error {
	if err := o.Config.Validate(); err != nil {
		return err
	}
	switch {
	case o.Policy == amp.FP8 && o.Recompute != gpt.RecomputeNone:
		return fmt.Errorf("train: the fp8 policy trains without recomputation for now; use --recompute none")
	case o.Policy == amp.FP8 && o.FP8 != (amp.FP8Recipe{}) && o.FP8.Validate() != nil:
		return fmt.Errorf("train: %w", o.FP8.Validate())
	case o.Batch < 1:
		return fmt.Errorf("train: batch %d must be at least 1", o.Batch)
	case o.Accum < 0:
		return fmt.Errorf("train: accumulation steps %d must be at least 1 (0 means 1)", o.Accum)
	case !o.Recompute.Valid():
		return fmt.Errorf("train: unknown recompute level %d (choose none, gelu or layer)", int(o.Recompute))
	case o.Seq < 1 || o.Seq > o.Config.MaxSeq:
		return fmt.Errorf("train: sequence length %d must be in [1, %d], the model's maximum", o.Seq, o.Config.MaxSeq)
	case o.EvalEvery < 0 || o.SampleEvery < 0 || o.CheckpointEvery < 0 || o.SampleTokens < 0 || o.EvalBatches < 0:
		return fmt.Errorf("train: eval, sample and checkpoint intervals must not be negative")
	case o.AdamState != 0 && o.AdamState != tensor.F32 && o.AdamState != tensor.BF16:
		return fmt.Errorf("train: AdamW's moments are kept in fp32 or bf16, not %s", o.AdamState)
	case o.SaveDType != 0 && o.SaveDType != tensor.F32 && o.SaveDType != tensor.BF16 && o.SaveDType != tensor.F16:
		return fmt.Errorf("train: checkpoints are saved as f32, bf16 or f16, not %s", o.SaveDType)
	case o.Tokenizer != nil && o.Tokenizer.Vocab() > o.Config.Vocab:
		return fmt.Errorf("train: the %s tokenizer has %d tokens, more than the model's vocabulary of %d (use a larger vocabulary)", o.Tokenizer.Name(), o.Tokenizer.Vocab(), o.Config.Vocab)
	}
	return o.Optim.Validate()
}

// Metric is one line of the metrics log (JSON lines, one per step; eval and
// sample results ride on the step they happened at); see record.Metric.
type Metric = record.Metric

// Trainer runs the training loop of one model on one device.
type Trainer struct {
	Model  *gpt.Model
	Opt    *optim.AdamW
	Scaler *amp.GradScaler

	opts    Options
	dev     device.Device
	train   *data.Loader
	val     *data.Loader
	rng     *tensor.RNG
	step    int
	skipped int
	saved   int    // step of the last checkpoint written or resumed from (-1: none)
	dataKey string // fingerprint of the training tokens (see dataKey)
	in, tg  []int32
	tokens  []int32 // the training tokens (SetBatchShape makes a new loader over them)
	metrics *os.File
	fresh   bool           // replaces the run in OutDir at its first checkpoint (Recipe.Fresh; see pendingMetrics)
	ds      *devStep       // the device-resident step (devstep.go); nil on the host step
	poison  *tensor.Tensor // (1) F32 on the device: Options.InjectGrad's value
	lossAcc *tensor.Tensor // (Batch·Seq) F32 on the device with Accum > 1: Σ over micro-batches of the per-token losses

	// microHook, when set (by tests), sees the gradients after each
	// micro-batch of the host step (1-based step, 0-based micro-batch).
	microHook func(step, micro int, grads *tensor.Tensor)

	// gradHook, when set (by tests), sees the gradients of every step
	// before the norm and the optimizer: the one way to inject a non-finite
	// gradient on purpose.
	gradHook func(step int, grads *tensor.Tensor)
}

// New builds a model initialised from opts.Seed, its optimizer and scaler,
// and loaders over the training and validation tokens (val may be nil).
func New(dev device.Device, opts Options, trainTokens, valTokens []int32) (*Trainer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	for i, t := range trainTokens {
		if t < 0 || int(t) >= opts.Config.Vocab {
			return nil, fmt.Errorf("train: token %d at %d is outside the model's vocabulary of %d", t, i, opts.Config.Vocab)
		}
	}
	tl, err := stepLoader(trainTokens, opts)
	if err != nil {
		return nil, err
	}
	var vl *data.Loader
	if len(valTokens) > 0 {
		if vl, err = data.NewLoader(valTokens, opts.Batch, opts.Seq); err != nil {
			return nil, fmt.Errorf("train: validation split: %w", err)
		}
	}
	m, err := gpt.New(dev, opts.Config, opts.Policy)
	if err != nil {
		return nil, err
	}
	if err := m.SetRecompute(opts.Recompute); err != nil {
		m.Close()
		return nil, err
	}
	if opts.Policy == amp.FP8 && opts.FP8 != (amp.FP8Recipe{}) {
		if err := m.SetFP8Recipe(opts.FP8); err != nil {
			m.Close()
			return nil, err
		}
	}
	if err := m.Init(opts.Seed); err != nil {
		return nil, err
	}
	opt, err := optim.NewAdamWMoments(dev, m.Layout(), opts.Optim, opts.adamState(), opts.Seed^0xada5eed)
	if err != nil {
		return nil, err
	}
	N := opts.accum() * opts.Batch * opts.Seq
	t := &Trainer{
		Model: m, Opt: opt, Scaler: amp.NewGradScaler(opts.Policy.NeedsScaler()),
		opts: opts, dev: dev, train: tl, val: vl, rng: tensor.NewRNG(opts.Seed ^ 0x5eed), saved: -1, dataKey: dataKey(trainTokens),
		in: make([]int32, N), tg: make([]int32, N), tokens: trainTokens,
	}
	if opts.InjectGrad != nil {
		if t.poison, err = dev.Alloc(tensor.F32, 1); err != nil {
			t.Close()
			return nil, err
		}
	}
	if opts.accum() > 1 {
		if t.lossAcc, err = dev.Alloc(tensor.F32, opts.Batch*opts.Seq); err != nil {
			t.Close()
			return nil, err
		}
	}
	if err := t.initDevStep(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// SetBatchShape makes the following steps use B sequences of T tokens
// (a new loader over the training tokens, from their beginning). The
// device step captures a new graph for the new shape; it never replays
// one made for another. A checkpoint records the new shape.
func (t *Trainer) SetBatchShape(B, T int) error {
	o := t.opts
	o.Batch, o.Seq = B, T
	if err := o.Validate(); err != nil {
		return err
	}
	l, err := stepLoader(t.tokens, o)
	if err != nil {
		return err
	}
	if t.ds != nil && len(t.ds.pending) > 0 {
		return fmt.Errorf("train: SetBatchShape with device steps pending")
	}
	if t.lossAcc != nil && t.lossAcc.Numel() != B*T {
		t.dev.Free(t.lossAcc)
		if t.lossAcc, err = t.dev.Alloc(tensor.F32, B*T); err != nil {
			return err
		}
	}
	t.opts, t.train = o, l
	n := o.accum() * B * T
	t.in, t.tg = make([]int32, n), make([]int32, n)
	return nil
}

// accum returns the micro-batches of a step (Accum, 1 when 0).
func (o Options) accum() int { return max(1, o.Accum) }

// momentName names a moment dtype as --adam-state does (fp32, bf16).
func momentName(dt tensor.DType) string {
	if dt == tensor.BF16 {
		return "bf16"
	}
	return "fp32"
}

// adamState returns the moments' dtype (AdamState, F32 when 0).
func (o Options) adamState() tensor.DType {
	if o.AdamState == 0 {
		return tensor.F32
	}
	return o.AdamState
}

// stepLoader returns the loader of a step's tokens: accum·Batch sequences
// of Seq tokens, this rank's share under data-parallel training.
func stepLoader(tokens []int32, o Options) (*data.Loader, error) {
	B := o.accum() * o.Batch
	if r := o.Reducer; r != nil && r.World() > 1 {
		return data.NewShardedLoader(tokens, B, o.Seq, r.Rank(), r.World())
	}
	return data.NewLoader(tokens, B, o.Seq)
}

// StepsDone returns the number of training steps completed.
func (t *Trainer) StepsDone() int { return t.step }

// Step runs one training step: forward and backward on the next batch, the
// global gradient norm (unscaled, with the inf/NaN check in the same pass),
// the GradScaler update, clipping and AdamW. A step with a non-finite
// gradient is skipped: parameters and optimizer state stay as they were.
func (t *Trainer) Step() (Metric, error) {
	if t.ds != nil {
		if err := t.queueDevice(); err != nil {
			return Metric{}, err
		}
		ms, err := t.collect()
		if err != nil {
			return Metric{}, err
		}
		return ms[len(ms)-1], nil
	}
	// The whole step in one hop to the device's thread (device.Batcher):
	// its ops are issued there directly, not one hop each.
	var m Metric
	err := t.batch(func() error {
		var err error
		m, err = t.hostStep()
		return err
	})
	return m, err
}

// hostStep is Step with the GradScaler, clipping and the learning rate on
// the host: it waits for the loss and the gradient norm.
func (t *Trainer) hostStep() (Metric, error) {
	start := time.Now()
	o := t.opts
	scale := t.Scaler.LossScale()
	if err := t.train.Next(t.in, t.tg); err != nil {
		return Metric{}, err
	}
	t.Model.ZeroGrad()
	loss, err := t.gradients(scale)
	if err != nil {
		return Metric{}, err
	}
	if r := o.Reducer; r != nil && r.World() > 1 {
		if err := r.AllReduceMean(t.dev, t.Model.Grads()); err != nil {
			return Metric{}, err
		}
		if loss, err = r.MeanLoss(loss); err != nil {
			return Metric{}, err
		}
	}
	if t.gradHook != nil {
		t.gradHook(t.step+1, t.Model.Grads())
	}
	if o.InjectGrad != nil && o.accum() == 1 {
		if err := t.inject(t.step + 1); err != nil {
			return Metric{}, err
		}
	}
	norm, finite := t.dev.GradNorm(t.Model.Grads(), 1/scale)
	skip := t.Scaler.Update(finite)
	t.step++
	lr := o.Optim.LRAt(t.step)
	w := t.Model.FP8Weights() // under amp.FP8: the weights' copies, written with the update
	if skip {
		t.skipped++
		t.Opt.CastFP8(t.Model.Work(), w)
	} else {
		clip := o.Optim.ClipFactor(norm)
		t.Opt.Update(t.Model.Master(), t.Model.Work(), t.Model.Grads(), lr, clip/scale, w...)
	}
	if err := t.dev.Sync(); err != nil {
		return Metric{}, err
	}
	el := time.Since(start)
	return Metric{
		Step: t.step, Loss: loss, LR: lr, GradNorm: norm, LossScale: scale, StepSkipped: skip, Skipped: t.skipped,
		MsPerStep:  float64(el.Microseconds()) / 1000,
		TokensPerS: float64(o.accum()*o.Batch*o.Seq*world(o.Reducer)) / el.Seconds(),
	}, nil
}

// gradients accumulates the step's gradients of scale × mean loss over the
// batch in t.in and t.tg into the zeroed gradient buffer and returns the
// mean loss: one Gradients call, or with Accum > 1 one GradientsMicro per
// micro-batch (rows [i·B, (i+1)·B) of the step's batch, so the data order
// is that of one batch). There the loss is taken as the device step takes
// it (devstep.go): the per-token losses summed over micro-batches in fp32
// on the device, their mean, divided by Accum; and Options.InjectGrad's
// value is added after the first micro-batch, where the device step adds
// it too.
func (t *Trainer) gradients(scale float32) (float32, error) {
	o, m := t.opts, t.Model
	n := o.accum()
	if n == 1 {
		return m.Gradients(t.in, t.tg, o.Batch, o.Seq, scale)
	}
	BT := o.Batch * o.Seq
	t.dev.Zero(t.lossAcc)
	for i := range n {
		if _, err := m.GradientsMicro(t.in[i*BT:(i+1)*BT], t.tg[i*BT:(i+1)*BT], o.Batch, o.Seq, scale, n); err != nil {
			return 0, err
		}
		t.dev.Add(t.lossAcc, t.lossAcc, m.Losses(), BT)
		if i == 0 && o.InjectGrad != nil {
			if err := t.inject(t.step + 1); err != nil {
				return 0, err
			}
		}
		if t.microHook != nil {
			t.microHook(t.step+1, i, m.Grads())
		}
	}
	host := tensor.New(tensor.F32, BT)
	t.dev.Download(host, t.lossAcc)
	if err := t.dev.Sync(); err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range host.F32() {
		sum += float64(v)
	}
	return accumLoss(float32(sum/float64(BT)), n), nil
}

// accumLoss turns the mean over tokens of the per-token losses summed over
// n micro-batches into the step's mean loss (host and device step alike).
func accumLoss(summed float32, n int) float32 { return float32(float64(summed) / float64(n)) }

// Eval returns the mean loss over batches of the validation split (or all
// its whole batches when batches is 0), starting from its beginning.
func (t *Trainer) Eval(batches int) (float32, error) {
	if t.val == nil {
		return 0, fmt.Errorf("train: no validation split")
	}
	return EvalLoss(t.Model, t.val, t.opts.Batch, t.opts.Seq, batches)
}

// EvalLoss is the mean over batches of the mean loss, llm.c style: B
// windows of T tokens per batch, consecutive, whole batches only (all of
// them when batches is 0), from the loader's beginning.
func EvalLoss(m *gpt.Model, l *data.Loader, B, T, batches int) (float32, error) {
	n := l.Batches()
	if batches > 0 && batches < n {
		n = batches
	}
	if n < 1 {
		return 0, fmt.Errorf("train: the data holds no whole batch of %d x %d tokens", B, T)
	}
	l.Reset()
	in, tg := make([]int32, B*T), make([]int32, B*T)
	var sum float64
	for i := 0; i < n; i++ {
		if err := l.Next(in, tg); err != nil {
			return 0, err
		}
		loss, err := m.Forward(in, tg, B, T)
		if err != nil {
			return 0, err
		}
		sum += float64(loss)
	}
	l.Reset()
	return float32(sum / float64(n)), nil
}

// Sample continues prompt by n tokens, drawing from the softmax at
// temperature (0 picks the most likely token) with the trainer's RNG; the
// tokens continue valid UTF-8 (see Sampler).
func (t *Trainer) Sample(prompt []int32, n int, temperature float32) ([]int32, error) {
	s := newSampler(t.Model, t.tokenizer(), SampleOptions{Temperature: temperature}, t.rng.Uint64())
	defer s.Close()
	return s.Generate(prompt, n, nil)
}

// tokenizer returns the run's tokenizer (bytes when the options name none).
func (t *Trainer) tokenizer() data.Tokenizer {
	if t.opts.Tokenizer != nil {
		return t.opts.Tokenizer
	}
	return data.Bytes{}
}

// Run trains until the schedule's last step (or until, when 0 < until <
// Optim.Steps), evaluating, sampling and checkpointing as the options say,
// and calls report after every step. It checkpoints at the end and when ctx
// is cancelled, so an interrupted run can resume.
func (t *Trainer) Run(ctx context.Context, until int, report func(Metric)) error {
	o := t.opts
	last := o.Optim.Steps
	if until > 0 && until < last {
		last = until
	}
	if o.OutDir != "" {
		if err := t.openMetrics(); err != nil {
			return err
		}
		defer func() {
			t.metrics.Close()
			t.metrics = nil
			if t.fresh {
				// No checkpoint, or a first save cut after its commit point:
				// settle the folder as the next start would (the old run
				// whole, or the new one's model and log together).
				recoverCheckpoint(o.OutDir, false)
			}
		}()
	}
	skipRow := 0 // consecutive skipped steps
	for t.step < last {
		if err := ctx.Err(); err != nil {
			if o.OutDir != "" {
				if serr := t.Save(o.OutDir); serr != nil {
					return serr
				}
			}
			return err
		}
		ms, err := t.steps(last)
		if err != nil {
			return err
		}
		// Every step's metrics are checked, those the device path collected
		// in a batch too: the first that diverged ends the run there.
		var diverged error
		for i := range ms {
			if diverged = t.checkStep(&ms[i], &skipRow); diverged != nil {
				ms = ms[:i+1]
				break
			}
		}
		for _, m := range ms[:len(ms)-1] {
			if err := t.emit(m, report); err != nil {
				return err
			}
		}
		m := ms[len(ms)-1]
		end := t.step == last || diverged != nil
		if diverged == nil && t.val != nil && (o.EvalEvery > 0 && t.step%o.EvalEvery == 0 || end && o.EvalEvery > 0) {
			if m.ValLoss, err = t.Eval(o.EvalBatches); err != nil {
				return err
			}
			if m.FP8Overflows, err = t.fp8Overflows(); err != nil {
				return err
			}
			if t.opts.Policy == amp.FP8 {
				under, values, err := t.Model.FP8Underflows(t.opts.accum())
				if err != nil {
					return err
				}
				m.FP8Underflows = under
				if values > 0 {
					m.FP8UnderflowShare = float64(under) / float64(values)
				}
				under, values, err = t.Model.FP8LogitGradUnderflows(t.opts.accum())
				if err != nil {
					return err
				}
				m.FP8LogitGradUnderflows = under
				if values > 0 {
					m.FP8LogitGradUnderflowShare = float64(under) / float64(values)
				}
			}
		}
		if diverged == nil && o.SampleTokens > 0 && (o.SampleEvery > 0 && t.step%o.SampleEvery == 0 || end) {
			prompt, err := t.tokenizer().Encode([]byte(o.SamplePrompt))
			if err != nil {
				return fmt.Errorf("train: sample prompt: %w", err)
			}
			toks, err := t.Sample(prompt, o.SampleTokens, 0.8)
			if err != nil {
				return err
			}
			m.Sample = o.SamplePrompt + data.DecodeText(t.tokenizer(), toks)
		}
		if err := t.emit(m, report); err != nil {
			return err
		}
		if diverged != nil {
			return diverged
		}
		if o.OutDir != "" && (end || o.CheckpointEvery > 0 && t.step%o.CheckpointEvery == 0) {
			if err := t.Save(o.OutDir); err != nil {
				return err
			}
		}
	}
	return nil
}

// steps runs one step on the host path, or queues device steps up to the
// next step that logs, evaluates, samples, checkpoints or ends the run
// (at most LogEvery), and returns their metrics in order.
func (t *Trainer) steps(last int) ([]Metric, error) {
	if t.ds == nil {
		m, err := t.Step()
		if err != nil {
			return nil, err
		}
		return []Metric{m}, nil
	}
	o := t.opts
	for {
		if err := t.queueDevice(); err != nil {
			return nil, err
		}
		s := t.step
		stop := s == last || len(t.ds.pending) >= t.logEvery() ||
			o.EvalEvery > 0 && s%o.EvalEvery == 0 || o.SampleTokens > 0 && o.SampleEvery > 0 && s%o.SampleEvery == 0 ||
			o.OutDir != "" && o.CheckpointEvery > 0 && s%o.CheckpointEvery == 0
		if stop {
			return t.collect()
		}
	}
}

// emit writes m to the metrics log and reports it.
func (t *Trainer) emit(m Metric, report func(Metric)) error {
	if t.metrics != nil {
		if err := json.NewEncoder(t.metrics).Encode(m); err != nil {
			return fmt.Errorf("train: metrics: %w", err)
		}
	}
	if report != nil {
		report(m)
	}
	return nil
}

// MetricsFile is the JSON-lines log inside OutDir.
const MetricsFile = "metrics.jsonl"

func (t *Trainer) openMetrics() error {
	if err := os.MkdirAll(t.opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := recoverCheckpoint(t.opts.OutDir, false); err != nil {
		return err
	}
	path := filepath.Join(t.opts.OutDir, MetricsFile)
	if t.fresh {
		path = filepath.Join(t.opts.OutDir, pendingMetrics)
	}
	// Keep only the lines of steps already done (a resumed run may have
	// logged steps after its last checkpoint), atomically.
	var keep []byte
	if old, err := readMetrics(path); err == nil && t.step > 0 {
		for _, line := range record.Lines(old) {
			if step, ok := record.LineStep(line); ok && step <= t.step {
				keep = append(append(keep, line...), '\n')
			}
		}
	}
	if err := writeAtomic(path, keep); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	t.metrics = f
	return nil
}

// optionsKey is what must match for a resume to continue the same run.
func (t *Trainer) optionsKey() string {
	o := t.opts
	k := struct {
		Config     gpt.Config
		Policy     string
		Batch, Seq int
		Optim      optim.Config
		Seed       uint64
		Tokenizer  string `json:",omitempty"` // empty for bytes, as before tokenizers existed
		Accum      int    `json:",omitempty"` // 0 without accumulation, as before it existed
	}{o.Config, o.Policy.String(), o.Batch, o.Seq, o.Optim, o.Seed, "", 0}
	if o.accum() > 1 {
		k.Accum = o.accum()
	}
	if o.Tokenizer != nil && o.Tokenizer.Name() != "bytes" {
		k.Tokenizer = data.TokenizerID(o.Tokenizer)
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// Save writes the model and the training state into dir, committed as one
// unit (see pendingModel): a crash or an error at any point leaves the
// previous pair or the new one, never a mix. Weights that are not finite,
// or that give a loss that is not finite on the last batch, are refused, so
// a diverged run never overwrites its last good checkpoint.
func (t *Trainer) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	params, err := t.Model.Params()
	if err != nil {
		return err
	}
	for i, v := range params {
		if !finite(float64(v)) {
			return fmt.Errorf("%w at step %d: parameter %d is %v; this step's checkpoint was not written (%s)", ErrDiverged, t.step, i, v, t.keptNote())
		}
	}
	// Finite weights can still have blown up: the loss a step reports is
	// that of the weights before its update, so weights that give NaN
	// would only show at the next step, after they were saved. The weights
	// are tried on the last batch first (one forward pass).
	if t.step > 0 {
		BT := t.opts.Batch * t.opts.Seq // the step's first micro-batch
		loss, err := t.Model.Forward(t.in[:BT], t.tg[:BT], t.opts.Batch, t.opts.Seq)
		if err != nil {
			return err
		}
		if !finite(float64(loss)) {
			return fmt.Errorf("%w at step %d: the weights give a loss of %v on the step's batch under %s; this step's checkpoint was not written (%s); lower the learning rate or lengthen the warm-up",
				ErrDiverged, t.step, loss, t.opts.Policy, t.keptNote())
		}
	}
	mdt := t.Opt.Moments()
	m, v := tensor.New(mdt, t.Opt.M.Numel()), tensor.New(mdt, t.Opt.V.Numel())
	t.dev.Download(m, t.Opt.M)
	t.dev.Download(v, t.Opt.V)
	if err := t.dev.Sync(); err != nil {
		return err
	}
	st := state{
		Step: t.step, OptSteps: t.Opt.Steps, Scale: t.Scaler.Scale, GoodSteps: t.Scaler.GoodSteps,
		Skipped: t.skipped, RNG: t.rng.State, DataPos: t.train.Pos(), Options: t.optionsKey(), Data: t.dataKey,
	}
	if mdt == tensor.BF16 {
		st.Moments = "bf16"
	}
	fresh := t.fresh && dir == t.opts.OutDir
	fp8, err := t.Model.FP8Scales()
	if err != nil {
		return err
	}
	if err := saveCheckpoint(dir, t.opts.Config, params, tokenizerMeta(t.opts.Tokenizer), t.opts.SaveDType, st, m.ToF32(), v.ToF32(), fp8, fresh); err != nil {
		return err
	}
	if fresh {
		t.fresh = false // the run is the folder's now
	}
	t.saved = t.step
	return nil
}

// Resume restores a run saved by Save in dir (finishing a save that was cut
// after its commit point). The options must match the saved run's (same
// model, policy, batch, schedule and seed), and so must the training data
// unless Options.DataChanged says the change is meant.
func (t *Trainer) Resume(dir string) error {
	if err := recoverCheckpoint(dir, false); err != nil {
		return err
	}
	cfg, params, sum, err := loadModel(filepath.Join(dir, ModelFile))
	if err != nil {
		return err
	}
	if cfg != t.opts.Config {
		return fmt.Errorf("train: checkpoint in %s is a %v model, this run is %v", dir, cfg, t.opts.Config)
	}
	st, m, v, fp8, err := loadState(filepath.Join(dir, StateFile), len(params))
	if err != nil {
		return err
	}
	if st.ModelSum != sum {
		return fmt.Errorf("train: %s and %s come from different saves (%w); delete the folder or resume from a complete checkpoint", ModelFile, StateFile, ErrCorrupt)
	}
	if st.Options != t.optionsKey() {
		return fmt.Errorf("train: the checkpoint in %s was made with other options; use the same preset, precision, batch, seq, steps, lr and seed to resume", dir)
	}
	pos := st.DataPos
	if st.Data != "" && st.Data != t.dataKey {
		if !t.opts.DataChanged {
			return fmt.Errorf("train: the checkpoint in %s was trained on other data (%s, now %s); resume on the same data, or say the change is meant (Options.DataChanged, druto train --data-changed)", dir, st.Data, t.dataKey)
		}
		if t.train.Seek(pos) != nil {
			pos = 0 // the new data are shorter: start them from the beginning
		}
	}
	if err := t.Model.SetParams(params); err != nil {
		return err
	}
	switch {
	case fp8 != nil && t.opts.Policy == amp.FP8:
		if r := t.fp8Recipe(); fp8.H != r.History || fp8.Margin != r.Margin {
			return fmt.Errorf("train: the checkpoint in %s was made with other options: FP8 history %d and margin %d, this run has %d and %d; resume with --fp8-history %d --fp8-margin %d",
				dir, fp8.H, fp8.Margin, r.History, r.Margin, fp8.H, fp8.Margin)
		}
		if err := t.Model.SetFP8Scales(fp8); err != nil {
			return fmt.Errorf("train: the checkpoint in %s: %w (%w)", dir, err, ErrCorrupt)
		}
	case t.opts.Policy == amp.FP8 && st.Step > 0:
		t.notice(fmt.Sprintf("train: the checkpoint in %s has no FP8 scaling state: the scales start again from 1", dir))
	}
	// The moments come back in the dtype of this run's optimizer: bf16
	// ones widen exactly, fp32 ones round to nearest into bf16.
	if saved := map[string]string{"": "fp32"}[st.Moments] + st.Moments; saved != momentName(t.Opt.Moments()) {
		t.notice(fmt.Sprintf("train: the checkpoint's AdamW moments are %s, this run keeps them in %s: converted", saved, momentName(t.Opt.Moments())))
	}
	hm, hv := tensor.New(t.Opt.Moments(), len(m)), tensor.New(t.Opt.Moments(), len(v))
	if err := errors.Join(hm.SetF32(m), hv.SetF32(v)); err != nil {
		return err
	}
	t.dev.Upload(t.Opt.M, hm)
	t.dev.Upload(t.Opt.V, hv)
	if err := t.train.Seek(pos); err != nil {
		return err
	}
	t.step, t.skipped, t.Opt.Steps = st.Step, st.Skipped, st.OptSteps
	t.Scaler.Scale, t.Scaler.GoodSteps, t.Scaler.Skipped = st.Scale, st.GoodSteps, st.Skipped
	t.rng.State = st.RNG
	t.saved = st.Step
	if t.ds != nil {
		t.ds.inited = false // the next device step uploads the restored counts
		for _, s := range t.ds.slots() {
			s.reset()
		}
	}
	return t.dev.Sync()
}

// WriteMetric writes one metric as a JSON line (for callers logging elsewhere).
func WriteMetric(w io.Writer, m Metric) error { return json.NewEncoder(w).Encode(m) }

// Close frees the model's and the optimizer's device memory.
func (t *Trainer) Close() {
	t.closeDevStep()
	if t.poison != nil {
		t.dev.Free(t.poison)
		t.poison = nil
	}
	if t.lossAcc != nil {
		t.dev.Free(t.lossAcc)
		t.lossAcc = nil
	}
	t.Opt.Close()
	t.Model.Close()
}

func world(r Reducer) int {
	if r == nil {
		return 1
	}
	return r.World()
}

// fp8Recipe is the FP8 recipe the run trains with (Options.FP8, or the
// default for its zero value).
func (t *Trainer) fp8Recipe() amp.FP8Recipe {
	if t.opts.FP8 == (amp.FP8Recipe{}) {
		return amp.DefaultFP8Recipe()
	}
	return t.opts.FP8
}

// fp8Overflows returns the non-finite amaxes the model's FP8 casts have
// met so far (0 unless it trains under amp.FP8).
func (t *Trainer) fp8Overflows() (int64, error) {
	sc, err := t.Model.FP8Scales()
	if err != nil || sc == nil {
		return 0, err
	}
	var n int64
	for k := range sc.K {
		n += sc.Bad(k)
	}
	return n, nil
}
