// Package nbui holds the small helpers that keep druto's GoNB notebooks
// thin: where a notebook runs (Lang, Repo, RunDir), tables (the detect
// report, kernels, AMP policy and benchmark records) shown as HTML in a
// notebook, a live training display that updates in place (Progress), and
// notes in the notebook's language (Note).
//
// English and Bangla notebooks share their code cells, so the language is not
// written in the code: Lang reads it from the folder the notebook is in
// (notebooks/en or notebooks/bn), and every header and note is looked up in
// the package's one message table by its English text.
//
// Outside a notebook (gonbui.IsNotebook false: a test, a program) nothing is
// sent to Jupyter: tables and notes print as aligned plain text on standard
// output, and Progress prints a line every tenth of the run.
package nbui
