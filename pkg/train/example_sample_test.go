package train_test

import (
	"fmt"
	"os"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// A notebook's way to sample from a checkpoint: the tokenizer comes from
// the file, and the text is printed as it is generated.
func ExampleSampler() {
	ck, err := train.LoadCheckpoint("out/model.safetensors")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := gpt.New(cpu.New(device.Options{Fused: true}), ck.Config, amp.FP32)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	if err := m.SetParams(ck.Params); err != nil {
		fmt.Println(err)
		return
	}
	s, err := train.NewSampler(m, ck.Tokenizer, train.SampleOptions{Temperature: 0.8, TopK: 40, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := s.Sample("রিনা ", 200, os.Stdout); err != nil {
		fmt.Println(err)
	}
}
