package plotting

import (
	"fmt"
	"strings"
)

// msg names one user-visible string of the plots.
type msg int

const (
	msgLossTitle msg = iota
	msgStep
	msgLoss
	msgVal
	msgSpeedUpTitle
	msgSpeedUp
	msgConfig
	msgThroughputTitle
	msgBatch
	msgTokensPerS
	msgKTokensPerS
	msgMTokensPerS
	msgMemoryTitle
	msgMemory
	msgParams
	msgGrads
	msgOptimizer
	msgActivations
	msgUtilTitle
	msgTime
	msgUtil
	msgBandwidthTitle
	msgKernel
	msgBandwidth
	msgCeiling
	msgCeilingAt
	msgProfileTitle
	msgMsPerStep
	msgOfCeiling
	msgGenerationTitle
	msgDecodeTokS
	msgWeightBound
	msgKVCache
	msgRecompute
	msgHere
	msgSkippedPoints
	msgClampedPoints
	msgScaleTitle
	msgLossScaleLog2
	msgSkippedStep
	msgCount // number of messages; keep last
)

// messages is the one table of labels: English and Bangla. Entries with %s
// are formats taking one data string (a run label, a unit).
var messages = [msgCount][2]string{
	msgLossTitle:       {"Training loss", "প্রশিক্ষণের ক্ষতি"},
	msgStep:            {"step", "ধাপ"},
	msgLoss:            {"loss (nats/token)", "ক্ষতি (ন্যাট/টোকেন)"},
	msgVal:             {"%s (validation)", "%s (যাচাই)"},
	msgSpeedUpTitle:    {"Speed-up over the baseline", "বেসলাইনের তুলনায় গতিবৃদ্ধি"},
	msgSpeedUp:         {"speed-up (×)", "গতিবৃদ্ধি (×)"},
	msgConfig:          {"model configuration", "মডেল কনফিগারেশন"},
	msgThroughputTitle: {"Throughput by batch size", "ব্যাচের আকার অনুযায়ী থ্রুপুট"},
	msgBatch:           {"batch size (sequences)", "ব্যাচের আকার (সিকোয়েন্স)"},
	msgTokensPerS:      {"throughput (tokens/s)", "থ্রুপুট (টোকেন/সেকেন্ড)"},
	msgKTokensPerS:     {"throughput (thousand tokens/s)", "থ্রুপুট (হাজার টোকেন/সেকেন্ড)"},
	msgMTokensPerS:     {"throughput (million tokens/s)", "থ্রুপুট (মিলিয়ন টোকেন/সেকেন্ড)"},
	msgMemoryTitle:     {"Memory by component", "উপাদান অনুযায়ী মেমরি"},
	msgMemory:          {"memory (%s)", "মেমরি (%s)"},
	msgParams:          {"parameters", "প্যারামিটার"},
	msgGrads:           {"gradients", "গ্রেডিয়েন্ট"},
	msgOptimizer:       {"optimizer state", "অপটিমাইজারের অবস্থা"},
	msgActivations:     {"activations", "অ্যাক্টিভেশন"},
	msgUtilTitle:       {"GPU utilisation", "জিপিইউ ব্যবহার"},
	msgTime:            {"time (s)", "সময় (সেকেন্ড)"},
	msgUtil:            {"GPU utilisation (%)", "জিপিইউ ব্যবহার (%)"},
	msgBandwidthTitle:  {"Kernel memory bandwidth", "কার্নেলের মেমরি ব্যান্ডউইথ"},
	msgKernel:          {"kernel", "কার্নেল"},
	msgBandwidth:       {"achieved bandwidth (GB/s)", "অর্জিত ব্যান্ডউইথ (GB/s)"},
	msgCeiling:         {"measured ceiling", "পরিমাপ করা সর্বোচ্চ"},
	msgCeilingAt:       {"measured ceiling (%s GB/s)", "পরিমাপ করা সর্বোচ্চ (%s GB/s)"},
	msgProfileTitle:    {"Where a training step's time goes", "একটি প্রশিক্ষণ ধাপের সময় কোথায় যায়"},
	msgMsPerStep:       {"time per step (ms)", "প্রতি ধাপে সময় (মিলিসেকেন্ড)"},
	msgOfCeiling:       {"%s of ceiling", "সর্বোচ্চের %s"},
	msgGenerationTitle: {"Text generation speed", "লেখা তৈরির গতি"},
	msgDecodeTokS:      {"new tokens per second", "প্রতি সেকেন্ডে নতুন টোকেন"},
	msgWeightBound:     {"bound: weights read once a token", "সীমা: প্রতি টোকেনে ওজন একবার পড়া"},
	msgKVCache:         {"KV cache", "KV ক্যাশ"},
	msgRecompute:       {"no cache", "ক্যাশ ছাড়া"},
	msgHere:            {"here", "এখানে"},
	msgSkippedPoints:   {"%s points left out (NaN or ±Inf)", "%sটি বিন্দু বাদ দেওয়া হয়েছে (NaN বা ±Inf)"},
	msgClampedPoints:   {"%s points beyond ±1e300 drawn at the edge", "±1e300-এর বাইরের %sটি বিন্দু কিনারায় আঁকা হয়েছে"},
	msgScaleTitle:      {"Loss scale, step by step", "ধাপে ধাপে লস স্কেল"},
	msgLossScaleLog2:   {"loss scale (log₂)", "লস স্কেল (log₂)"},
	msgSkippedStep:     {"%s: skipped step", "%s: বাদ পড়া ধাপ"},
}

// locale turns messages and numbers into the strings of one language.
type locale struct {
	bn     bool // Bangla labels
	digits bool // Bengali digits in numbers
}

// localeOf returns the locale the options ask for.
func localeOf(c config) locale { return locale{bn: c.lang == "bn", digits: c.digits} }

// msg returns message m in the locale's language, formatted with args when
// the message is a format.
func (l locale) msg(m msg, args ...any) string {
	s := messages[m][0]
	if l.bn {
		s = messages[m][1]
	}
	if len(args) > 0 {
		s = fmt.Sprintf(s, args...)
	}
	return s
}

// num writes the ASCII digits of s as Bengali digits when the locale asks
// for them.
func (l locale) num(s string) string {
	if !l.digits {
		return s
	}
	return ToBanglaDigits(s)
}

// ToBanglaDigits returns s with the ASCII digits 0-9 replaced by the Bengali
// digits ০-৯; everything else is kept.
func ToBanglaDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '০' + (r - '0')
		}
		return r
	}, s)
}

// hasBengali reports whether s contains a rune of the Bengali block.
func hasBengali(s string) bool {
	for _, r := range s {
		if isBengali(r) {
			return true
		}
	}
	return false
}

// isBengali reports whether r is in the Unicode Bengali block.
func isBengali(r rune) bool { return r >= 0x0980 && r <= 0x09FF }
