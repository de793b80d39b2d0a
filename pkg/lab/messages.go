package lab

import "github.com/druto/druto/internal/nblang"

// bangla is the lab's message table: each English format and its Bangla
// (the same verbs; explicit indexes may reorder them). A format missing
// here is shown in English; TestCatalogue checks that none is missing.
var bangla = map[string]string{
	"All %d cases match the reference. Well done!":                                                      "%dটি কেসের সবগুলোই রেফারেন্সের সঙ্গে মিলেছে। চমৎকার!",
	"Your function panicked (%s): %s.":                                                                  "আপনার ফাংশন প্যানিক করেছে (%s): %s।",
	"Your function did not return within %.0f s: is there a loop that never ends?":                      "আপনার ফাংশন %.0f সেকেন্ডের মধ্যে ফেরেনি: কোনো লুপ কি কখনো শেষ হচ্ছে না?",
	"With %s, %s%s is %v where the reference has %.4g.":                                                 "%s হলে %s%s পাওয়া গেল %v, অথচ রেফারেন্সে আছে %.4g।",
	"With %s, %s%s is %.6g where the reference has %.6g: an error of %.2g against a tolerance of %.2g.": "%s হলে %s%s পাওয়া গেল %.6g, অথচ রেফারেন্সে আছে %.6g: ত্রুটি %.2g, সহনসীমা %.2g।",
	"Hint: %s":       "ইঙ্গিত: %s",
	"%d of %d cases": "%[2]dটি কেসের মধ্যে %[1]dটি",
	"the gradient against finite differences": "সসীম অন্তরে মাপা ঢালের সঙ্গে গ্রেডিয়েন্টের তুলনা",
	"large logits (about 100)":                "বড় লজিট (প্রায় ১০০)",
	"%d steps":                                "%dটি ধাপ",
	"n=%d, step %d":                           "n=%d, %d নম্বর ধাপ",
	"step %d (finite gradients)":              "%d নম্বর ধাপ (গ্রেডিয়েন্ট সসীম)",
	"step %d (an overflow)":                   "%d নম্বর ধাপ (ওভারফ্লো)",

	// Hints (the texts of hints below).
	"the outputs are still all zero: your function has not written them yet. Fill in the TODO.":                                          "আউটপুটগুলো এখনো সব শূন্য: আপনার ফাংশন এখনো সেগুলো লেখেনি। TODO অংশটি পূরণ করুন।",
	"read the message and the place it names; an index out of range often means a row was indexed with the wrong length.":                "বার্তাটি আর তাতে বলা জায়গাটি দেখুন; index out of range মানে প্রায়ই কোনো সারিকে ভুল দৈর্ঘ্য দিয়ে ইনডেক্স করা হয়েছে।",
	"check each loop's condition and the variable it increases.":                                                                         "প্রতিটি লুপের শর্ত আর যে চলকটি বাড়ছে, তা মিলিয়ে দেখুন।",
	"the values belong to other places: the tensor is row-major, so element (i, j) of an (N, C) tensor is at i*C + j, not j*N + i.":      "মানগুলো অন্য জায়গার: টেনসরটি সারি-প্রধান (row-major), তাই (N, C) টেনসরের (i, j) উপাদান থাকে i*C + j-তে, j*N + i-তে নয়।",
	"exp overflows for large logits. Subtract the row's maximum before exp: softmax(x) = softmax(x - max(x)).":                           "বড় লজিটে exp উপচে পড়ে (overflow)। exp-এর আগে সারির সর্বোচ্চ মান বিয়োগ করুন: softmax(x) = softmax(x - max(x))।",
	"these look like log-probabilities; softmax returns the probabilities themselves.":                                                   "এগুলো লগ-সম্ভাবনার মতো দেখাচ্ছে; softmax ফেরত দেয় সম্ভাবনাগুলোই।",
	"each row must sum to 1: divide every exp by the sum of its own row.":                                                                "প্রতিটি সারির যোগফল ১ হতে হবে: প্রতিটি exp-কে তার নিজের সারির যোগফল দিয়ে ভাগ করুন।",
	"the sum was taken over the whole tensor; take one sum per row.":                                                                     "যোগফল নেওয়া হয়েছে পুরো টেনসরের ওপর; প্রতিটি সারির জন্য আলাদা যোগফল নিন।",
	"the gradient of the loss is softmax minus one-hot: subtract 1 at the target's column.":                                              "ক্ষতির গ্রেডিয়েন্ট হলো softmax বিয়োগ one-hot: লক্ষ্যের কলামে ১ বিয়োগ করুন।",
	"the sign is flipped: the loss is -log p[target], and its gradient is p - onehot.":                                                   "চিহ্ন উল্টে গেছে: ক্ষতি হলো -log p[target], আর তার গ্রেডিয়েন্ট p - onehot।",
	"the gradient here is of the sum of the losses, not their mean: do not divide by N.":                                                 "এখানে গ্রেডিয়েন্ট ক্ষতিগুলোর যোগফলের, গড়ের নয়: N দিয়ে ভাগ করবেন না।",
	"row i's target is at logits[i*V + targets[i]], not logits[targets[i]].":                                                             "i নম্বর সারির লক্ষ্য থাকে logits[i*V + targets[i]]-তে, logits[targets[i]]-তে নয়।",
	"the variance divides by C-1; layernorm uses the population variance, divided by C.":                                                 "ভেদাঙ্ক (variance) C-1 দিয়ে ভাগ করা হয়েছে; লেয়ারনর্ম নেয় পুরো সমষ্টির ভেদাঙ্ক, C দিয়ে ভাগ করে।",
	"eps belongs inside the square root: rstd = 1/sqrt(var + eps).":                                                                      "eps বসবে বর্গমূলের ভেতরে: rstd = 1/sqrt(var + eps)।",
	"after normalising, scale by weight and add bias: out = (x - mean)·rstd·weight + bias.":                                              "নর্মালাইজ করার পরে weight দিয়ে গুণ করে bias যোগ করুন: out = (x - mean)·rstd·weight + bias।",
	"rstd is the reciprocal of the standard deviation, 1/sqrt(var + eps), not the deviation itself.":                                     "rstd হলো আদর্শ বিচ্যুতির বিপরীত, 1/sqrt(var + eps); বিচ্যুতি নিজে নয়।",
	"dweight and dbias are sums over every row: add each row's contribution instead of overwriting it.":                                  "dweight আর dbias সব সারির যোগফল: প্রতিটি সারির অবদান আগেরটির ওপর লিখে না দিয়ে যোগ করুন।",
	"dweight sums dout times the normalised input, (x - mean)·rstd, over the rows; dbias sums dout alone.":                               "dweight হলো সারিগুলো জুড়ে dout গুণ নর্মালাইজ করা ইনপুট (x - mean)·rstd-এর যোগফল; dbias শুধু dout-এর যোগফল।",
	"dinp has three terms: dnorm, minus its mean over the row, minus norm times mean(dnorm·norm), all times rstd (dnorm = dout·weight).": "dinp-এ তিনটি পদ: dnorm, বিয়োগ সারিতে তার গড়, বিয়োগ norm গুণ mean(dnorm·norm), সবটা গুণ rstd (dnorm = dout·weight)।",
	"divide m by 1 - beta1^step and v by 1 - beta2^step (bias correction) before the update.":                                            "আপডেটের আগে m-কে 1 - beta1^step আর v-কে 1 - beta2^step দিয়ে ভাগ করুন (বায়াস সংশোধন)।",
	"AdamW decays the weights directly (p -= lr·wd·p); adding wd·p to the gradient is Adam with L2, not AdamW.":                          "AdamW ওজন সরাসরি কমায় (p -= lr·wd·p); গ্রেডিয়েন্টে wd·p যোগ করা হলো L2-সহ Adam, AdamW নয়।",
	"eps is added after the square root: p -= lr·m̂/(sqrt(v̂) + eps).":                                                                   "eps যোগ হয় বর্গমূলের পরে: p -= lr·m̂/(sqrt(v̂) + eps)।",
	"v is the moving average of the squared gradient, g·g.":                                                                              "v হলো গ্রেডিয়েন্টের বর্গ g·g-এর চলমান গড়।",
	"the weight decay is scaled by the learning rate: p -= lr·wd·p.":                                                                     "ওজন হ্রাস (weight decay) শেখার হার দিয়ে গুণ হয়: p -= lr·wd·p।",
	"a step with an inf or NaN gradient must be skipped (return true).":                                                                  "inf বা NaN গ্রেডিয়েন্টের ধাপ বাদ দিতে হবে (true ফেরত দিন)।",
	"on an overflow the scale must shrink by BackoffFactor.":                                                                             "ওভারফ্লো হলে স্কেল BackoffFactor দিয়ে গুণ করে ছোট করতে হবে।",
	"the scale grows once GoodSteps reaches GrowthInterval, not one step earlier or later.":                                              "GoodSteps যখন GrowthInterval-এ পৌঁছায় ঠিক তখনই স্কেল বাড়ে, এক ধাপ আগে বা পরে নয়।",
	"after an overflow, or after the scale grows, the count of good steps starts again at 0.":                                            "ওভারফ্লোর পরে, কিংবা স্কেল বাড়ার পরে, ভালো ধাপের গণনা আবার ০ থেকে শুরু হয়।",
	"your gradient disagrees with the slope of the loss measured by finite differences: check the derivative step by step.":              "সসীম অন্তরে মাপা ক্ষতির ঢালের সঙ্গে আপনার গ্রেডিয়েন্ট মিলছে না: অন্তরকলজটি ধাপে ধাপে মিলিয়ে দেখুন।",
}

// hints are the kinds of mistake the diagnoses tell apart: a key (kept in
// Failure.Hint and the JSON record) and its English text.
var hints = map[string]string{
	"empty":      "the outputs are still all zero: your function has not written them yet. Fill in the TODO.",
	"panic":      "read the message and the place it names; an index out of range often means a row was indexed with the wrong length.",
	"timeout":    "check each loop's condition and the variable it increases.",
	"transposed": "the values belong to other places: the tensor is row-major, so element (i, j) of an (N, C) tensor is at i*C + j, not j*N + i.",
	"maxsub":     "exp overflows for large logits. Subtract the row's maximum before exp: softmax(x) = softmax(x - max(x)).",
	"logsoftmax": "these look like log-probabilities; softmax returns the probabilities themselves.",
	"normalise":  "each row must sum to 1: divide every exp by the sum of its own row.",
	"globalsum":  "the sum was taken over the whole tensor; take one sum per row.",
	"onehot":     "the gradient of the loss is softmax minus one-hot: subtract 1 at the target's column.",
	"sign":       "the sign is flipped: the loss is -log p[target], and its gradient is p - onehot.",
	"mean":       "the gradient here is of the sum of the losses, not their mean: do not divide by N.",
	"rowoffset":  "row i's target is at logits[i*V + targets[i]], not logits[targets[i]].",
	"variance":   "the variance divides by C-1; layernorm uses the population variance, divided by C.",
	"eps":        "eps belongs inside the square root: rstd = 1/sqrt(var + eps).",
	"affine":     "after normalising, scale by weight and add bias: out = (x - mean)·rstd·weight + bias.",
	"rstd":       "rstd is the reciprocal of the standard deviation, 1/sqrt(var + eps), not the deviation itself.",
	"rowsum":     "dweight and dbias are sums over every row: add each row's contribution instead of overwriting it.",
	"dweight":    "dweight sums dout times the normalised input, (x - mean)·rstd, over the rows; dbias sums dout alone.",
	"dinp":       "dinp has three terms: dnorm, minus its mean over the row, minus norm times mean(dnorm·norm), all times rstd (dnorm = dout·weight).",
	"biascorr":   "divide m by 1 - beta1^step and v by 1 - beta2^step (bias correction) before the update.",
	"l2":         "AdamW decays the weights directly (p -= lr·wd·p); adding wd·p to the gradient is Adam with L2, not AdamW.",
	"epssqrt":    "eps is added after the square root: p -= lr·m̂/(sqrt(v̂) + eps).",
	"square":     "v is the moving average of the squared gradient, g·g.",
	"decaylr":    "the weight decay is scaled by the learning rate: p -= lr·wd·p.",
	"noskip":     "a step with an inf or NaN gradient must be skipped (return true).",
	"nobackoff":  "on an overflow the scale must shrink by BackoffFactor.",
	"growth":     "the scale grows once GoodSteps reaches GrowthInterval, not one step earlier or later.",
	"resetgood":  "after an overflow, or after the scale grows, the count of good steps starts again at 0.",
	"fd":         "your gradient disagrees with the slope of the loss measured by finite differences: check the derivative step by step.",
}

// msg formats an English format in lang.
func msg(lang, format string, args ...any) string {
	return nblang.Sprintf(bangla, lang, format, args...)
}
