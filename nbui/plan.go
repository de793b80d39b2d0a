package nbui

import (
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// t4Budget is the budget PlanOn assumes where neither a GPU nor
// DRUTO_GPU_MEMORY gives one: a T4's 16 GiB (Colab's free GPU), so that a
// laptop's notebook shows a plan a student's GPU would run.
const t4Budget = 16 << 30

// PlanOn plans what druto train --fit would for the preset at its longest
// sequence and a total batch of total tokens, in the precision dev trains
// fastest in (train.AutoPolicy): on a GPU within its free memory (capped
// by DRUTO_GPU_MEMORY), the candidates timed there; elsewhere within
// DRUTO_GPU_MEMORY or, without it, a T4's 16 GiB with a GPU's reserve,
// compared by their FLOPs (a probe of a large model on the CPU would take
// minutes).
func PlanOn(dev device.Device, preset string, total int) (*train.Plan, error) {
	cfg, err := gpt.Preset(preset)
	if err != nil {
		return nil, err
	}
	q := train.PlanRequest{Config: cfg, Policy: train.AutoPolicy(dev), Seq: cfg.MaxSeq, TotalBatch: total, Fused: dev.Fused()}
	_, gpu := dev.(interface {
		FreeMemory() (free, total uint64, err error)
	})
	memCap, err := device.MemoryCap()
	if err != nil {
		return nil, err
	}
	if !gpu && memCap == 0 {
		q.Budget, q.Reserve, q.BudgetFrom = t4Budget, train.GPUReserve, "assumed: a T4's 16 GiB, no GPU here"
	}
	return train.PlanOn(dev, q, gpu)
}

// PlanTable tabulates a plan in language lang: a row per recomputation
// level, its caption and the reason for the choice as the caption's second
// sentence.
func PlanTable(lang string, p *train.Plan) *Table {
	t := NewTable(lang, train.PlanColumns...)
	for i := range p.Rows {
		row := p.Cells(i)
		for _, j := range []int{0, 4, 8} { // the level ("none"), fits (yes/no) and the choice mark are words
			row[j] = Sprintf(lang, row[j])
		}
		cells := make([]any, len(row))
		for j, c := range row {
			cells[j] = c
		}
		t.Add(cells...)
	}
	f, a := p.Caption()
	for i, x := range a { // the budget's words ("no limit", where it comes from)
		if s, ok := x.(string); ok {
			a[i] = Sprintf(lang, s)
		}
	}
	wf, wa := p.Why()
	for i, x := range wa { // the levels named in the reason
		if s, ok := x.(string); ok {
			wa[i] = Sprintf(lang, s)
		}
	}
	t.WithCaption(f, a...)
	t.Caption += " " + Sprintf(lang, "Why: %s", Sprintf(lang, wf, wa...))
	return t
}
