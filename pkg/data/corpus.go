package data

import "strconv"

// The built-in corpus is a stream of facts, each written as an English line
// followed by its Bangla translation. A handful of sentence templates over
// the small vocabulary of vocab.go give the text structure a tiny byte-level
// model can learn within a few hundred steps: fixed word order, agreement
// (1 book / 3 books, there is / there are, has / have, আছে / ছিল, the
// classifiers টি and জন, verb endings by person and tense, the tense that a
// time adverb asks for), numbers in ASCII digits in English and Bangla digits
// in Bangla (sometimes as words), arithmetic whose answers are right, and
// translation pairs that repeat a line's names and numbers in the next.

// template weights: how often each kind of fact is drawn, out of their sum.
var templates = []struct {
	weight int
	render func(*generator)
}{
	{16, (*generator).possession},
	{16, (*generator).action},
	{8, (*generator).going},
	{12, (*generator).existence},
	{9, (*generator).description},
	{8, (*generator).liking},
	{15, (*generator).arithmetic},
	{8, (*generator).storyProblem},
	{4, (*generator).counting},
	{4, (*generator).weekdays},
}

var templateTotal = func() int {
	t := 0
	for _, tp := range templates {
		t += tp.weight
	}
	return t
}()

// generator renders facts into two line buffers, en and bn (no newline).
type generator struct {
	r      *rng
	en, bn []byte
}

func newGenerator(seed uint64) *generator {
	return &generator{r: newRNG(seed), en: make([]byte, 0, 256), bn: make([]byte, 0, 512)}
}

// fact draws one fact and renders its English and Bangla lines.
func (g *generator) fact() {
	g.en, g.bn = g.en[:0], g.bn[:0]
	k := g.r.intn(templateTotal)
	for _, tp := range templates {
		if k < tp.weight {
			tp.render(g)
			break
		}
		k -= tp.weight
	}
	if len(g.en) > 0 && g.en[0] >= 'a' && g.en[0] <= 'z' { // a sentence opening with a number word
		g.en[0] -= 'a' - 'A'
	}
}

// Corpus returns about n bytes of the built-in bilingual corpus: whole lines,
// an English sentence followed by its Bangla translation, each ending in
// '\n'. The result is at most n bytes; for n >= 8192 it is at least 0.95n
// and is a prefix of Corpus(seed, m) for every m > n (a line is at most about
// 210 bytes). The text depends only on seed, the same on every platform and
// Go version.
func Corpus(seed uint64, n int) []byte {
	if n <= 0 {
		return []byte{}
	}
	out := make([]byte, 0, n)
	g := newGenerator(seed)
	full := func() bool { return 20*len(out) >= 19*n }
	// A line that does not fit before the result is 95% full is skipped and
	// others are tried, which only happens for small n.
	for misses := 0; misses < 1000; {
		g.fact()
		for _, line := range [2][]byte{g.en, g.bn} {
			if len(out)+len(line)+1 > n {
				if full() {
					return out
				}
				misses++
				continue
			}
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// Sample returns one line of the corpus for seed, without its newline:
// English for even seeds and Bangla for odd ones.
func Sample(seed uint64) string {
	g := newGenerator(seed)
	g.fact()
	if seed%2 == 0 {
		return string(g.en)
	}
	return string(g.bn)
}

// ---- numbers ----

// numStyle says how a fact writes its numbers: as words (only when every
// number of the fact is at most 20) or as digits.
type numStyle bool

const (
	inDigits numStyle = false
	inWords  numStyle = true
)

// style draws the number style of a fact whose largest number is max.
func (g *generator) style(max int) numStyle {
	if max <= len(enNumberWords)-1 && g.r.chance(1, 5) {
		return inWords
	}
	return inDigits
}

func appendEnNum(b []byte, n int, s numStyle) []byte {
	if s == inWords && n >= 0 && n < len(enNumberWords) {
		return append(b, enNumberWords[n]...)
	}
	return strconv.AppendInt(b, int64(n), 10)
}

// appendBnDigits writes n in Bangla digits (০-৯, U+09E6..U+09EF).
func appendBnDigits(b []byte, n int) []byte {
	var tmp [20]byte
	d := strconv.AppendInt(tmp[:0], int64(n), 10)
	for _, c := range d {
		if c == '-' {
			b = append(b, '-')
			continue
		}
		b = append(b, 0xe0, 0xa7, 0xa6+(c-'0'))
	}
	return b
}

func appendBnNum(b []byte, n int, s numStyle) []byte {
	if s == inWords && n >= 0 && n < len(bnNumberWords) {
		return append(b, bnNumberWords[n]...)
	}
	return appendBnDigits(b, n)
}

// appendBnCount writes a number with its classifier: ৩টি, ২জন, তিনটি, দুজন
// (two takes the short stem দু before a classifier).
func appendBnCount(b []byte, n int, human bool, s numStyle) []byte {
	if s == inWords && n == 2 {
		b = append(b, "দু"...)
	} else {
		b = appendBnNum(b, n, s)
	}
	if human {
		return append(b, "জন"...)
	}
	return append(b, "টি"...)
}

// appendEnCount writes "1 book", "3 books", "one book".
func appendEnCount(b []byte, n int, nn *noun, s numStyle) []byte {
	b = appendEnNum(b, n, s)
	b = append(b, ' ')
	if n == 1 {
		return append(b, nn.sg...)
	}
	return append(b, nn.pl...)
}

// count draws how many things a sentence is about: often one (so that the
// singular is common), mostly up to ten, sometimes up to twenty.
func (g *generator) count() int {
	switch k := g.r.intn(10); {
	case k < 2:
		return 1
	case k < 9:
		return g.r.between(2, 10)
	default:
		return g.r.between(11, 20)
	}
}

// ---- subjects ----

// subject is who a sentence is about: a name or a pronoun.
type subject struct {
	en, bn, bnGen string
	person        int
	sg3           bool
}

func (g *generator) subject() subject {
	if g.r.chance(3, 5) {
		p := &people[g.r.intn(len(people))]
		return subject{p.en, p.bn, p.bnGen, third, true}
	}
	p := &pronouns[g.r.intn(len(pronouns))]
	return subject{p.en, p.bn, p.bnGen, p.person, p.sg3}
}

// enVerb writes the English form of v for the subject and tense.
func enVerb(b []byte, v *verb, s subject, tense int) []byte {
	switch tense {
	case past:
		return append(b, v.enPast...)
	case future:
		b = append(b, "will "...)
		return append(b, v.en...)
	}
	if s.sg3 {
		return append(b, v.en3...)
	}
	return append(b, v.en...)
}

func (g *generator) noun() *noun { return &nouns[g.r.intn(len(nouns))] }

// thing draws a noun that is not a person.
func (g *generator) thing() *noun {
	for {
		if n := g.noun(); !n.human {
			return n
		}
	}
}

// owned draws a noun that a person can have.
func (g *generator) owned() *noun {
	for {
		if n := g.noun(); n.owned {
			return n
		}
	}
}

func pick[T any](r *rng, xs []T) T { return xs[r.intn(len(xs))] }

// cat appends the parts to b.
func cat(b []byte, parts ...string) []byte {
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// either returns a when cond, else b.
func either(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// bnExists ends a Bangla sentence of having or being somewhere: "৩টি বই
// আছে।", or "ছিল।" in the past.
func (g *generator) bnExists(k int, n *noun, st numStyle, isPast bool) {
	g.bn = appendBnCount(g.bn, k, n.human, st)
	g.bn = cat(g.bn, " ", n.bn, either(isPast, " ছিল।", " আছে।"))
}

// ---- templates ----

// possession: "Rina has 3 books." / "রিনার ৩টি বই আছে।"
func (g *generator) possession() {
	s, n, k := g.subject(), g.owned(), g.count()
	isPast := g.r.chance(1, 4)
	st := g.style(k)

	g.en = cat(g.en, s.en, either(isPast, " had ", either(s.sg3, " has ", " have ")))
	g.en = append(appendEnCount(g.en, k, n, st), '.')

	g.bn = cat(g.bn, s.bnGen, " ")
	g.bnExists(k, n, st, isPast)
}

// action: "Rina bought 4 mangoes yesterday." / "রিনা গতকাল ৪টি আম কিনল।"
func (g *generator) action() {
	s, n, k := g.subject(), g.noun(), g.count()
	v := &verbs[pick(g.r, n.verbs)]
	t := times[g.r.intn(len(times))]
	st := g.style(k)

	g.en = cat(enVerb(cat(g.en, s.en, " "), v, s, t.tense), " ")
	g.en = cat(appendEnCount(g.en, k, n, st), " ", t.en, ".")

	g.bn = appendBnCount(cat(g.bn, s.bn, " ", t.bn, " "), k, n.human, st)
	g.bn = cat(g.bn, " ", n.bn, either(n.human, "কে", ""), " ", v.bn[t.tense][s.person], "।")
}

// going: "Rina goes to school every day." / "রিনা প্রতিদিন স্কুলে যায়।"
func (g *generator) going() {
	s := g.subject()
	d := destinations[g.r.intn(len(destinations))]
	t := times[g.r.intn(len(times))]

	g.en = cat(enVerb(cat(g.en, s.en, " "), &goVerb, s, t.tense), " ", d.en, " ", t.en, ".")
	g.bn = cat(g.bn, s.bn, " ", t.bn, " ", d.bn, " ", goVerb.bn[t.tense][s.person], "।")
}

// existence: "There are 3 cows in the field." / "মাঠে ৩টি গরু আছে।"
func (g *generator) existence() {
	n, k := g.noun(), g.count()
	p := places[pick(g.r, n.places)]
	isPast := g.r.chance(1, 5)
	st := g.style(k)

	there := either(k == 1, "There is ", "There are ")
	if isPast {
		there = either(k == 1, "There was ", "There were ")
	}
	g.en = cat(appendEnCount(cat(g.en, there), k, n, st), " ", p.en, ".")

	g.bn = cat(g.bn, p.bn, " ")
	g.bnExists(k, n, st, isPast)
}

// description: "The book is new." / "বইটি নতুন।", "Rina's mangoes are
// sweet." / "রিনার আমগুলো মিষ্টি।"
func (g *generator) description() {
	n := g.thing()
	a := adjectives[pick(g.r, n.adjs)]
	plural := g.r.chance(1, 3)
	var owner *person
	if n.owned && g.r.chance(1, 3) {
		owner = &people[g.r.intn(len(people))]
	}

	if owner != nil {
		g.en = cat(g.en, owner.en, "'s ")
		g.bn = cat(g.bn, owner.bnGen, " ")
	} else {
		g.en = cat(g.en, "The ")
	}
	if plural {
		g.en = cat(g.en, n.pl, " are ")
	} else {
		g.en = cat(g.en, n.sg, " is ")
	}
	g.en = cat(g.en, a.en, ".")
	g.bn = cat(g.bn, n.bn, either(plural, "গুলো ", "টি "), a.bn, "।")
}

// liking: "Mitu likes mangoes." / "মিতু আম পছন্দ করে।", "I do not like
// fish." / "আমি মাছ পছন্দ করি না।"
func (g *generator) liking() {
	s := g.subject()
	var n *noun
	for n = g.noun(); !n.likes; n = g.noun() {
	}
	neg := g.r.chance(1, 3)

	like := either(s.sg3, " likes ", " like ")
	if neg {
		like = either(s.sg3, " does not like ", " do not like ")
	}
	g.en = cat(g.en, s.en, like, n.pl, ".")
	g.bn = cat(g.bn, s.bn, " ", n.bn, " ", likeForms[s.person], either(neg, " না", ""), "।")
}

// arithWords are the words of arithmetic's sums, differences and
// products: English's operator, and Bangla's operator, "is" and ending.
var arithWords = [3]struct{ en, bn, bnIs, bnEnd string }{
	{" plus ", " আর ", " মিলে ", ""},
	{" minus ", " থেকে ", " বাদ দিলে ", " থাকে"},
	{" times ", " গুণ ", " সমান ", ""},
}

// arithmetic: "2 plus 3 is 5." / "২ আর ৩ মিলে ৫।", "7 minus 2 is 5." / "৭
// থেকে ২ বাদ দিলে ৫ থাকে।", "3 times 4 is 12." / "৩ গুণ ৪ সমান ১২।"
func (g *generator) arithmetic() {
	var a, b, c, op int
	switch k := g.r.intn(10); {
	case k < 5:
		a, b = g.r.between(0, 20), g.r.between(0, 20)
		c = a + b
	case k < 8:
		a = g.r.between(1, 30)
		b = g.r.between(0, a)
		c, op = a-b, 1
	default:
		a, b = g.r.between(1, 10), g.r.between(1, 10)
		c, op = a*b, 2
	}
	st := g.style(max(a, b, c))
	w := arithWords[op]

	g.en = appendEnNum(cat(appendEnNum(g.en, a, st), w.en), b, st)
	g.en = cat(appendEnNum(cat(g.en, " is "), c, st), ".")
	g.bn = appendBnNum(cat(appendBnNum(g.bn, a, st), w.bn), b, st)
	g.bn = cat(appendBnNum(cat(g.bn, w.bnIs), c, st), w.bnEnd, "।")
}

// storyProblem: two people and a sum or a difference.
//
//	"Rina has 3 books and Rahim has 4, so they have 7 in all." /
//	"রিনার ৩টি আর রহিমের ৪টি বই আছে, মোট ৭টি।"
//	"Rina had 7 mangoes and gave 2 to Rahim, so she has 5 left." /
//	"রিনার ৭টি আম ছিল, সে রহিমকে ২টি দিল, এখন তার ৫টি বাকি আছে।"
func (g *generator) storyProblem() {
	i := g.r.intn(len(people))
	j := g.r.intn(len(people) - 1)
	if j >= i {
		j++
	}
	a, b := &people[i], &people[j]

	if g.r.chance(1, 2) {
		n := g.owned()
		x, y := g.r.between(1, 10), g.r.between(1, 10)
		st := g.style(x + y)

		g.en = appendEnCount(cat(g.en, a.en, " has "), x, n, st)
		g.en = appendEnNum(cat(g.en, " and ", b.en, " has "), y, st)
		g.en = cat(appendEnNum(cat(g.en, ", so they have "), x+y, st), " in all.")

		g.bn = appendBnCount(cat(g.bn, a.bnGen, " "), x, n.human, st)
		g.bn = appendBnCount(cat(g.bn, " আর ", b.bnGen, " "), y, n.human, st)
		g.bn = appendBnCount(cat(g.bn, " ", n.bn, " আছে, মোট "), x+y, n.human, st)
		g.bn = cat(g.bn, "।")
		return
	}

	var n *noun
	for n = g.owned(); n.human; n = g.owned() {
	}
	x := g.r.between(2, 12)
	y := g.r.between(1, x-1)
	st := g.style(x)

	g.en = appendEnCount(cat(g.en, a.en, " had "), x, n, st)
	g.en = appendEnNum(cat(g.en, " and gave "), y, st)
	g.en = cat(g.en, " to ", b.en, either(a.female, ", so she has ", ", so he has "))
	g.en = cat(appendEnNum(g.en, x-y, st), " left.")

	g.bn = appendBnCount(cat(g.bn, a.bnGen, " "), x, false, st)
	g.bn = appendBnCount(cat(g.bn, " ", n.bn, " ছিল, সে ", b.bnObj, " "), y, false, st)
	g.bn = cat(appendBnCount(cat(g.bn, " দিল, এখন তার "), x-y, false, st), " বাকি আছে।")
}

// counting: "Count from 3 to 7: 3, 4, 5, 6, 7." / "৩ থেকে ৭ পর্যন্ত গোনো:
// ৩, ৪, ৫, ৬, ৭।"
func (g *generator) counting() {
	from := g.r.between(1, 20)
	to := from + g.r.between(3, 6)
	st := g.style(to)

	g.en = appendEnNum(cat(appendEnNum(cat(g.en, "Count from "), from, st), " to "), to, st)
	g.bn = appendBnNum(cat(appendBnNum(g.bn, from, st), " থেকে "), to, st)
	g.en, g.bn = cat(g.en, ": "), cat(g.bn, " পর্যন্ত গোনো: ")
	for k := from; k <= to; k++ {
		if k > from {
			g.en, g.bn = cat(g.en, ", "), cat(g.bn, ", ")
		}
		g.en, g.bn = appendEnNum(g.en, k, st), appendBnNum(g.bn, k, st)
	}
	g.en, g.bn = cat(g.en, "."), cat(g.bn, "।")
}

// weekdays: "If today is Monday, tomorrow is Tuesday." / "আজ সোমবার হলে
// আগামীকাল মঙ্গলবার।" and the same with yesterday.
func (g *generator) weekdays() {
	d := g.r.intn(len(enDays))
	other, en, bn := (d+1)%len(enDays), ", tomorrow is ", " হলে আগামীকাল "
	if !g.r.chance(1, 2) {
		other, en, bn = (d+len(enDays)-1)%len(enDays), ", yesterday was ", " হলে গতকাল ছিল "
	}
	g.en = cat(g.en, "If today is ", enDays[d], en, enDays[other], ".")
	g.bn = cat(g.bn, "আজ ", bnDays[d], bn, bnDays[other], "।")
}
