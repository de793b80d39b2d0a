// Package dist runs data-parallel training: one process per rank, each
// with the whole model, each reading its own part of every global batch
// (data.NewShardedLoader), the gradients averaged over ranks after backward
// and before the gradient norm. It implements train.Reducer twice: Ring, an
// all-reduce over TCP between the rank processes for CPUs, and NCCLReducer,
// NCCL's all-reduce for GPUs.
//
// # Ranks
//
// A process learns its place from the environment, by the convention of
// torchrun (and what Slurm or Kubernetes launchers are set up to provide):
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, with
// LOCAL_WORLD_SIZE optional. FromEnv reads and validates them; `druto train
// --ranks N` (CPU) and `--gpus N` (one GPU each) start N local processes
// with them set.
//
// # Rendezvous
//
// Join connects every rank to rank 0 over TCP at MASTER_ADDR:MASTER_PORT:
// rank 0 listens, the others dial it (retrying until the timeout, since rank
// 0 may start last), and each says who it is. When all have arrived, rank 0
// broadcasts a blob (the NCCL unique id for GPUs) and the addresses of the
// ranks' ring listeners, and every rank passes a barrier. A rank that does
// not arrive within the timeout is named in the error every rank returns.
// The connections to rank 0 stay open as the group's control channel:
// Barrier and the mean of the loss run over it.
//
// # Buckets
//
// The gradients live in one flat buffer. Plan cuts it into buckets of at
// most DefaultBucketBytes (25 MiB, as PyTorch DDP), whole tensors where
// they fit, in reverse layout order: the order backward produces them.
// The reducers all-reduce bucket after bucket, after backward (train.Step
// calls them then): there is no overlap with backward. With one bucket per
// launch queued on the GPU's stream and all of them in one NCCL group, the
// host never waits between buckets; overlapping them with backward needs a
// hook inside gpt's backward pass, which the reverse order is ready for.
//
// # Determinism
//
// The ring reduces each bucket by reduce-scatter and all-gather in float32,
// every chunk summed in one fixed order (for chunk c of W: ranks c, c+1, ...,
// c-1 mod W), then divided by W by the one rank that owns the chunk, and
// copied to the others. So the averaged gradients are bit-identical on
// every rank and from run to run, and every rank's GradScaler and clipping
// decide the same: an Inf on one rank's gradients makes the average
// non-finite everywhere, and every rank skips the step. The loss is
// averaged over the control channel in rank order, the same bits on all.
package dist
