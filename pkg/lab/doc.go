// Package lab checks the ops a student writes in a course lab against
// druto's CPU reference (pkg/device/cpu) on the shapes of the op's contract
// (device.Ops), odd sizes included, under the contract's tolerance, and
// checks gradients by finite differences.
//
// A lab notebook's cell calls Check with an Exercise built from the
// student's function (Softmax, CrossEntropy, LayerNorm, LayerNormBackward,
// AdamW, ScalerUpdate, Attention, AttentionBackward). Check runs the
// function in a goroutine, catches a panic and stops waiting after a time
// limit, and shows one short paragraph in the notebook's language: which
// output and index went wrong, expected against got, the error against the
// tolerance, and a hint chosen from the kind of mistake (a transposed
// layout, a missing max-subtraction, a variance over N-1, a missing causal
// mask, ...). Each check ends with a score line and a JSON record that
// Grade collects from executed notebooks.
//
// Lab 5 (a fused bias + GELU) checks a Go twin, BiasGELU, and the same op
// as CUDA C, BiasGELUKernel, which a KernelRunner compiles with NVRTC and
// runs on the GPU (package labcuda's; it needs cgo, so only lab 5's
// notebook imports it), then times against the device's copy bandwidth.
// Where there is no GPU the kernel's exercise is skipped with one line
// (Result.Skipped) and Grade leaves it out of the score.
//
// Lab 6 (byte-pair encoding) compares token ids rather than numbers:
// CountPairs, MergePair, TrainBPE and EncodeBPE run the student's
// functions on random byte sequences, on Bangla lines of druto's corpus
// (BanglaLines, cut by Chunks) and on edge cases, against druto's own BPE
// in pkg/data; ShowBytes, ShowMerges and ShowEncoding show what the
// notebook's BPE learned, in the notebook's language.
//
// Release writes student notebooks from solution notebooks (each
// "// BEGIN SOLUTION" ... "// END SOLUTION" block replaced by a stub), and
// Grade executes a folder of submitted notebooks headless and tabulates
// their scores.
package lab
