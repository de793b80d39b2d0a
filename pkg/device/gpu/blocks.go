package gpu

// blocks.go: the block size (threads) of every kernel launch, read from the
// kernel source that defines it (kernels.Block: its `#define NAME N` line,
// which the kernel itself uses and nvcc and NVRTC compile), so a block size
// is written once. TestLaunchBlocks checks every launch of the hooked op
// tests against the kernel's `// druto:block` line.

import (
	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
)

var (
	lnRowBlock    = kernels.MustBlock("layernorm.cu", "LN_ROW_BLOCK")    // a warp per row: the forward and the decomposed row means
	lnBackThreads = kernels.MustBlock("layernorm.cu", "LN_BWD_BLOCK")    // layernorm_backward
	lnTMABlock    = kernels.MustBlock("layernorm.cu", "LN_TMA_BLOCK")    // layernorm_backward_tma_rf32
	lnCBackBlock  = kernels.MustBlock("layernorm.cu", "LN_CBWD_BLOCK")   // layernorm_backward_rf32_cC
	lnTMARows     = lnTMABlock / 32                                      // rows a stage: a warp each
	lnReduceBlock = kernels.MustBlock("layernorm.cu", "LN_REDUCE_BLOCK") // layernorm_reduce
	lnColsumBlock = kernels.MustBlock("layernorm.cu", "LN_COLSUM_BLOCK") // layernorm_colsum(_f32)
	lnEWBlock     = kernels.MustBlock("layernorm.cu", "LN_EW_BLOCK")     // add and the decomposed elementwise passes

	geluBlock      = kernels.MustBlock("gelu.cu", "GELU_BLOCK")
	adamwBlock     = kernels.MustBlock("adamw.cu", "ADAMW_BLOCK")
	castBlock      = kernels.MustBlock("cast.cu", "CAST_BLOCK")
	gnBlock        = kernels.MustBlock("gradnorm.cu", "GN_THREADS")
	stepBlock      = kernels.MustBlock("step.cu", "ST_THREADS")
	ce3Block       = kernels.MustBlock("crossentropy.cu", "CE3_THREADS")
	ceTMABlock     = kernels.MustBlock("crossentropy.cu", "CE_TMA_THREADS")
	ceEWBlock      = kernels.MustBlock("crossentropy.cu", "CE_EW_BLOCK")
	encBlock       = kernels.MustBlock("encoder.cu", "ENC_BLOCK")
	encThreads     = kernels.MustBlock("encoder.cu", "ENC_THREADS") // the backward's sort, segment and fixup kernels
	attnRowBlock   = kernels.MustBlock("attention.cu", "ATTN_ROW_BLOCK")
	attnEWBlock    = kernels.MustBlock("attention.cu", "ATTN_EW_BLOCK")
	flashBlock     = kernels.MustBlock("flash_attention.cu", "FA_BLOCK")
	flashRowBlock  = kernels.MustBlock("flash_attention.cu", "FA_ROW_BLOCK")
	flashEWBlock   = kernels.MustBlock("flash_attention.cu", "FA_EW_BLOCK")
	flash2Block    = kernels.MustBlock("flash_attention2.cu", "FA2_BLOCK")
	flash2BwdBlock = kernels.MustBlock("flash_attention2.cu", "FA2_BWD_BLOCK") // the backward variant 2 and its helpers
	biasGradBlock  = kernels.MustBlock("matmul.cu", "BIAS_GRAD_BLOCK")
	addF32Block    = kernels.MustBlock("matmul.cu", "ADD_F32_BLOCK")
	castBiasBlock  = kernels.MustBlock("matmul.cu", "CAST_BIAS_BLOCK")
	rowsBlock      = kernels.MustBlock("matmul.cu", "ROWS_BLOCK")
	rowsMax        = kernels.MustDefine("matmul.cu", "ROWS_MAX")
)

// blockHook, when set (by TestLaunchBlocks, with launchHook), receives the
// block of every hooked launch.
var blockHook func(kernel string, block cuda.Dim3)

// memsetHook, when set (with launchHook), receives every memset the hooked
// ops would queue (store_test.go: the store forms zero nothing).
var memsetHook func(p cuda.DevicePtr, n int)
