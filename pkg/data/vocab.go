package data

// The corpus vocabulary: every word of the generated text is in these tables.
// Each entry carries its English and Bangla forms and what it may combine
// with, so that the sentences built from them are grammatical and make sense.

// person is a named person; Bangla needs the genitive (রিনার, রহিমের) and
// the objective (রিনাকে) besides the name.
type person struct {
	en, bn string
	bnGen  string // genitive: "-র" after a vowel, "-এর" after a consonant
	bnObj  string // objective: name + "কে"
	female bool   // English he/she
}

var people = []person{
	{"Rina", "রিনা", "রিনার", "রিনাকে", true},
	{"Rahim", "রহিম", "রহিমের", "রহিমকে", false},
	{"Karim", "করিম", "করিমের", "করিমকে", false},
	{"Mitu", "মিতু", "মিতুর", "মিতুকে", true},
	{"Sumon", "সুমন", "সুমনের", "সুমনকে", false},
	{"Nadia", "নাদিয়া", "নাদিয়ার", "নাদিয়াকে", true},
	{"Tanvir", "তানভীর", "তানভীরের", "তানভীরকে", false},
	{"Shila", "শীলা", "শীলার", "শীলাকে", true},
	{"Arif", "আরিফ", "আরিফের", "আরিফকে", false},
	{"Priya", "প্রিয়া", "প্রিয়ার", "প্রিয়াকে", true},
	{"Joy", "জয়", "জয়ের", "জয়কে", false},
	{"Mina", "মীনা", "মীনার", "মীনাকে", true},
	{"Rafiq", "রফিক", "রফিকের", "রফিককে", false},
	{"Anika", "অনিকা", "অনিকার", "অনিকাকে", true},
	{"Dipa", "দীপা", "দীপার", "দীপাকে", true},
	{"Imran", "ইমরান", "ইমরানের", "ইমরানকে", false},
}

// Grammatical person, which selects the Bangla verb ending (আমি পড়ি, তুমি
// পড়ো, সে পড়ে); plural pronouns take the same ending as the singular.
const (
	first = iota
	second
	third
)

// Tenses, selected by the time adverb of a sentence.
const (
	present = iota
	past
	future
)

// pronoun is a subject other than a name.
type pronoun struct {
	en, bn string
	bnGen  string // আমার, তাদের, ...
	person int
	sg3    bool // English third person singular: "has", "goes", "does"
}

var pronouns = []pronoun{
	{"I", "আমি", "আমার", first, false},
	{"We", "আমরা", "আমাদের", first, false},
	{"You", "তুমি", "তোমার", second, false},
	{"They", "তারা", "তাদের", third, false},
	{"He", "সে", "তার", third, true},
	{"She", "সে", "তার", third, true},
}

// verb is a transitive verb: English base, third person singular and past
// forms; Bangla forms by tense and person.
type verb struct {
	en, en3, enPast string
	bn              [3][3]string // [tense][person]
}

// Verb indices, used in the nouns' lists of verbs that fit them.
const (
	vRead = iota
	vWrite
	vEat
	vBuy
	vSell
	vBring
	vSee
	vDraw
	vCook
)

var verbs = []verb{
	vRead:  {"read", "reads", "read", [3][3]string{{"পড়ি", "পড়ো", "পড়ে"}, {"পড়লাম", "পড়লে", "পড়ল"}, {"পড়ব", "পড়বে", "পড়বে"}}},
	vWrite: {"write", "writes", "wrote", [3][3]string{{"লিখি", "লেখো", "লেখে"}, {"লিখলাম", "লিখলে", "লিখল"}, {"লিখব", "লিখবে", "লিখবে"}}},
	vEat:   {"eat", "eats", "ate", [3][3]string{{"খাই", "খাও", "খায়"}, {"খেলাম", "খেলে", "খেল"}, {"খাব", "খাবে", "খাবে"}}},
	vBuy:   {"buy", "buys", "bought", [3][3]string{{"কিনি", "কেনো", "কেনে"}, {"কিনলাম", "কিনলে", "কিনল"}, {"কিনব", "কিনবে", "কিনবে"}}},
	vSell:  {"sell", "sells", "sold", [3][3]string{{"বিক্রি করি", "বিক্রি করো", "বিক্রি করে"}, {"বিক্রি করলাম", "বিক্রি করলে", "বিক্রি করল"}, {"বিক্রি করব", "বিক্রি করবে", "বিক্রি করবে"}}},
	vBring: {"bring", "brings", "brought", [3][3]string{{"আনি", "আনো", "আনে"}, {"আনলাম", "আনলে", "আনল"}, {"আনব", "আনবে", "আনবে"}}},
	vSee:   {"see", "sees", "saw", [3][3]string{{"দেখি", "দেখো", "দেখে"}, {"দেখলাম", "দেখলে", "দেখল"}, {"দেখব", "দেখবে", "দেখবে"}}},
	vDraw:  {"draw", "draws", "drew", [3][3]string{{"আঁকি", "আঁকো", "আঁকে"}, {"আঁকলাম", "আঁকলে", "আঁকল"}, {"আঁকব", "আঁকবে", "আঁকবে"}}},
	vCook:  {"cook", "cooks", "cooked", [3][3]string{{"রান্না করি", "রান্না করো", "রান্না করে"}, {"রান্না করলাম", "রান্না করলে", "রান্না করল"}, {"রান্না করব", "রান্না করবে", "রান্না করবে"}}},
}

// goVerb is "go" (যাওয়া), used with destinations.
var goVerb = verb{"go", "goes", "went", [3][3]string{{"যাই", "যাও", "যায়"}, {"গেলাম", "গেলে", "গেল"}, {"যাব", "যাবে", "যাবে"}}}

// likeForms are the Bangla present forms of পছন্দ করা by person.
var likeForms = [3]string{"পছন্দ করি", "পছন্দ করো", "পছন্দ করে"}

// adjective is a predicate adjective: "The book is new." / "বইটি নতুন।"
type adjective struct{ en, bn string }

const (
	aNew = iota
	aOld
	aBig
	aSmall
	aRed
	aBlue
	aSweet
	aSour
	aRipe
	aYellow
	aFresh
	aLong
	aShort
	aBeautiful
	aWhite
	aBlack
	aHeavy
	aEmpty
	aGreen
	aTall
	aFunny
)

var adjectives = []adjective{
	aNew:       {"new", "নতুন"},
	aOld:       {"old", "পুরোনো"},
	aBig:       {"big", "বড়"},
	aSmall:     {"small", "ছোট"},
	aRed:       {"red", "লাল"},
	aBlue:      {"blue", "নীল"},
	aSweet:     {"sweet", "মিষ্টি"},
	aSour:      {"sour", "টক"},
	aRipe:      {"ripe", "পাকা"},
	aYellow:    {"yellow", "হলুদ"},
	aFresh:     {"fresh", "তাজা"},
	aLong:      {"long", "লম্বা"},
	aShort:     {"short", "ছোট"},
	aBeautiful: {"beautiful", "সুন্দর"},
	aWhite:     {"white", "সাদা"},
	aBlack:     {"black", "কালো"},
	aHeavy:     {"heavy", "ভারী"},
	aEmpty:     {"empty", "খালি"},
	aGreen:     {"green", "সবুজ"},
	aTall:      {"tall", "লম্বা"},
	aFunny:     {"funny", "মজার"},
}

// place is where things are: "There are 3 cows in the field." / "মাঠে ৩টি
// গরু আছে।" (Bangla: the locative case).
type place struct{ en, bn string }

const (
	pClass = iota
	pSchool
	pVillage
	pMarket
	pField
	pGarden
	pBox
	pBag
	pTable
	pInTree
	pRiver
	pBasket
	pRoom
	pOnTree
	pBook
	pHospital
)

var places = []place{
	pClass:    {"in the class", "ক্লাসে"},
	pSchool:   {"in the school", "স্কুলে"},
	pVillage:  {"in the village", "গ্রামে"},
	pMarket:   {"in the market", "বাজারে"},
	pField:    {"in the field", "মাঠে"},
	pGarden:   {"in the garden", "বাগানে"},
	pBox:      {"in the box", "বাক্সে"},
	pBag:      {"in the bag", "ব্যাগে"},
	pTable:    {"on the table", "টেবিলে"},
	pInTree:   {"in the tree", "গাছে"},
	pRiver:    {"in the river", "নদীতে"},
	pBasket:   {"in the basket", "ঝুড়িতে"},
	pRoom:     {"in the room", "ঘরে"},
	pOnTree:   {"on the tree", "গাছে"},
	pBook:     {"in the book", "বইটিতে"},
	pHospital: {"in the hospital", "হাসপাতালে"},
}

// destination is where people go: "Rina goes to school every day." / "রিনা
// প্রতিদিন স্কুলে যায়।"
type destination struct{ en, bn string }

var destinations = []destination{
	{"to school", "স্কুলে"},
	{"to the market", "বাজারে"},
	{"to the library", "লাইব্রেরিতে"},
	{"to the village", "গ্রামে"},
	{"to the river", "নদীতে"},
	{"to the field", "মাঠে"},
	{"to the office", "অফিসে"},
	{"home", "বাড়ি"},
	{"to the city", "শহরে"},
	{"to the hospital", "হাসপাতালে"},
}

// timeAdverb fixes the tense of its sentence: "yesterday" takes the past,
// "tomorrow" the future, "every day" the present, in both languages.
type timeAdverb struct {
	en, bn string
	tense  int
}

var times = []timeAdverb{
	{"every day", "প্রতিদিন", present},
	{"every morning", "প্রতিদিন সকালে", present},
	{"on Fridays", "প্রতি শুক্রবার", present},
	{"yesterday", "গতকাল", past},
	{"last week", "গত সপ্তাহে", past},
	{"tomorrow", "আগামীকাল", future},
	{"next week", "আগামী সপ্তাহে", future},
}

// noun is a countable noun. Bangla counts people with the classifier জন and
// things with টি (৩জন ছাত্র, ৩টি বই) and does not inflect the noun for
// number after a numeral; English does (1 book, 3 books).
type noun struct {
	sg, pl string // English singular and plural
	bn     string
	human  bool  // classifier জন, objective "-কে" after a verb
	owned  bool  // fits "Rina has 3 ..." and "Rina's ..."
	likes  bool  // fits "I like ..."
	verbs  []int // verbs that take it as their object
	adjs   []int // adjectives that describe it
	places []int // places where it is found
}

var nouns = []noun{
	{"book", "books", "বই", false, true, true, []int{vRead, vBuy, vSell, vBring}, []int{aNew, aOld, aBig, aSmall, aHeavy}, []int{pBox, pBag, pTable, pRoom}},
	{"pen", "pens", "কলম", false, true, false, []int{vBuy, vSell, vBring}, []int{aNew, aOld, aRed, aBlue, aBlack}, []int{pBox, pBag, pTable}},
	{"mango", "mangoes", "আম", false, true, true, []int{vEat, vBuy, vSell, vBring, vDraw}, []int{aSweet, aSour, aRipe, aBig, aSmall}, []int{pMarket, pBasket, pOnTree, pTable}},
	{"banana", "bananas", "কলা", false, true, true, []int{vEat, vBuy, vSell, vBring}, []int{aRipe, aSweet, aYellow, aSmall}, []int{pMarket, pBasket, pTable}},
	{"egg", "eggs", "ডিম", false, true, true, []int{vEat, vBuy, vSell, vBring, vCook}, []int{aFresh, aWhite, aBig, aSmall}, []int{pBasket, pBox}},
	{"fish", "fish", "মাছ", false, true, true, []int{vEat, vBuy, vSell, vSee, vCook, vDraw}, []int{aFresh, aBig, aSmall}, []int{pRiver, pMarket, pBasket}},
	{"letter", "letters", "চিঠি", false, true, false, []int{vRead, vWrite, vBring}, []int{aLong, aShort, aOld}, []int{pBox, pBag, pTable}},
	{"poem", "poems", "কবিতা", false, true, true, []int{vRead, vWrite}, []int{aLong, aShort, aBeautiful}, []int{pBook}},
	{"story", "stories", "গল্প", false, true, true, []int{vRead, vWrite}, []int{aLong, aShort, aFunny}, []int{pBook}},
	{"picture", "pictures", "ছবি", false, true, true, []int{vSee, vBuy, vDraw, vSell}, []int{aBeautiful, aNew, aOld, aBig}, []int{pRoom, pBook}},
	{"flower", "flowers", "ফুল", false, true, true, []int{vSee, vBuy, vBring, vDraw, vSell}, []int{aRed, aWhite, aYellow, aBeautiful}, []int{pGarden, pBasket}},
	{"bird", "birds", "পাখি", false, true, true, []int{vSee, vDraw}, []int{aSmall, aBeautiful, aBlack, aWhite}, []int{pInTree, pGarden}},
	{"cow", "cows", "গরু", false, true, false, []int{vSee, vBuy, vSell, vDraw}, []int{aWhite, aBlack, aBig}, []int{pField, pVillage}},
	{"box", "boxes", "বাক্স", false, true, false, []int{vBuy, vBring, vSell}, []int{aHeavy, aEmpty, aBig, aSmall, aRed}, []int{pRoom}},
	{"ball", "balls", "বল", false, true, true, []int{vBuy, vBring, vDraw}, []int{aRed, aBlue, aNew, aOld, aBig, aSmall}, []int{pField, pBox, pBasket}},
	{"chair", "chairs", "চেয়ার", false, true, false, []int{vBuy, vBring, vSell}, []int{aNew, aOld, aHeavy, aBig, aSmall}, []int{pRoom, pClass}},
	{"bag", "bags", "ব্যাগ", false, true, false, []int{vBuy, vBring, vSell}, []int{aHeavy, aEmpty, aNew, aOld, aBig}, []int{pRoom, pClass}},
	{"newspaper", "newspapers", "পত্রিকা", false, true, false, []int{vRead, vBuy, vBring, vSell}, []int{aNew, aOld}, []int{pTable, pBag}},
	{"tree", "trees", "গাছ", false, true, true, []int{vSee, vDraw}, []int{aTall, aGreen, aBig, aOld}, []int{pGarden, pVillage, pField}},
	{"cup", "cups", "কাপ", false, true, false, []int{vBuy, vBring, vSell}, []int{aEmpty, aWhite, aSmall}, []int{pTable, pBox}},
	{"leaf", "leaves", "পাতা", false, false, false, []int{vSee, vDraw}, []int{aGreen, aYellow, aBig, aSmall}, []int{pOnTree, pGarden}},
	{"student", "students", "ছাত্র", true, false, false, []int{vSee}, nil, []int{pClass, pSchool, pField}},
	{"teacher", "teachers", "শিক্ষক", true, false, false, []int{vSee}, nil, []int{pSchool, pClass}},
	{"doctor", "doctors", "ডাক্তার", true, false, false, []int{vSee}, nil, []int{pHospital, pVillage}},
	{"farmer", "farmers", "কৃষক", true, false, false, []int{vSee}, nil, []int{pVillage, pField, pMarket}},
	{"child", "children", "শিশু", true, false, false, []int{vSee}, nil, []int{pField, pGarden, pRoom, pSchool}},
	{"friend", "friends", "বন্ধু", true, true, false, []int{vSee}, nil, []int{pRoom, pClass}},
	{"player", "players", "খেলোয়াড়", true, false, false, []int{vSee}, nil, []int{pField}},
	{"girl", "girls", "মেয়ে", true, false, false, []int{vSee}, nil, []int{pClass, pSchool, pField}},
	{"boy", "boys", "ছেলে", true, false, false, []int{vSee}, nil, []int{pClass, pSchool, pField}},
}

// Number words, 0 to 20.
var enNumberWords = [...]string{
	"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
}

var bnNumberWords = [...]string{
	"শূন্য", "এক", "দুই", "তিন", "চার", "পাঁচ", "ছয়", "সাত", "আট", "নয়", "দশ",
	"এগারো", "বারো", "তেরো", "চৌদ্দ", "পনেরো", "ষোলো", "সতেরো", "আঠারো", "উনিশ", "বিশ",
}

// Days of the week, Sunday first.
var enDays = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

var bnDays = [...]string{"রবিবার", "সোমবার", "মঙ্গলবার", "বুধবার", "বৃহস্পতিবার", "শুক্রবার", "শনিবার"}
