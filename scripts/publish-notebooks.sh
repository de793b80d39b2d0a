#!/usr/bin/env bash
# Publishes druto's notebooks as a folder of web pages: executes every
# notebook, English and Bangla, with Jupyter and the GoNB kernel, exports
# each to HTML and writes an index page that links each English notebook to
# its Bangla twin. The folder can be put on any web server as it is.
#
#   scripts/publish-notebooks.sh OUT               # execute, then export
#   scripts/publish-notebooks.sh --executed DIR OUT  # export DIR/{en,bn}/*.ipynb,
#                                                    # already executed (the
#                                                    # notebook test's output)
#
# OUT gets index.html and, for each language L in en and bn:
#   L/NAME.html    the executed notebook as a page (links between notebooks
#                  point at the pages)
#   L/NAME.ipynb   the executed notebook (GitHub and nbviewer show it)
#   L/runs/        what the notebooks wrote: metrics, checkpoints, figures
#                  (not with --executed)
# OUT must not exist, or be a folder this script wrote before (it is then
# replaced); the pages are written to a temporary folder beside OUT first, so
# a failed run leaves OUT as it was. A notebook whose output shows an error
# (a panic, a non-zero exit, an error message on stderr) fails the run.
#
# Needs what scripts/install-test-deps.sh installs (Jupyter's nbconvert, the
# GoNB kernel) and Go's bin folder on PATH. DRUTO_NOTEBOOK_LIMIT (seconds,
# default 600) is the longest one cell may run.
set -euo pipefail

usage() {
  echo "usage: scripts/publish-notebooks.sh [--executed DIR] OUT" >&2
  exit 2
}
executed=""
case "${1:-}" in
  --executed)
    [ $# -eq 3 ] || usage
    executed="$(cd "$2" && pwd)" || { echo "publish-notebooks: --executed $2: no such folder" >&2; exit 1; }
    shift 2
    ;;
  -*|"") usage ;;
esac
[ $# -eq 1 ] || usage
out="$1"

repo="$(cd "$(dirname "$0")/.." && pwd)"
# Every notebook in notebooks/en (each has its Bangla twin in notebooks/bn).
names=()
for f in "$repo"/notebooks/en/*.ipynb; do names+=("$(basename "$f" .ipynb)"); done
langs=(en bn)
marker=".druto-published"

if [ -e "$out" ] && [ ! -e "$out/$marker" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "publish-notebooks: $out exists and was not written by this script; name a new folder" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

# /usr/bin/python3's Jupyter: another python3 earlier on PATH (pyenv, conda)
# cannot see Debian's nbconvert.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if ! "$PY" -m jupyter nbconvert --version >/dev/null 2>&1; then
  echo "publish-notebooks: Jupyter's nbconvert is missing: run scripts/install-test-deps.sh (apt-get install jupyter-nbconvert)" >&2
  exit 1
fi

stage="$(mktemp -d "$(dirname "$out")/.$(basename "$out").tmp-XXXXXX")"
chmod 755 "$stage"
trap 'rm -rf "$stage"' EXIT

if [ -z "$executed" ]; then
  if ! command -v gonb >/dev/null; then
    echo "publish-notebooks: gonb is not on PATH: run scripts/install-test-deps.sh and put \$(go env GOPATH)/bin on PATH" >&2
    exit 1
  fi
  # The GoNB kernel spec has an empty env: the kernel inherits this one.
  export PATH="$(go env GOPATH)/bin:$(go env GOROOT)/bin:$PATH"
  export GOPATH="$(go env GOPATH)" GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)"
  export DRUTO_REPO="$repo"
  unset DRUTO_LANG GOWORK
  limit="${DRUTO_NOTEBOOK_LIMIT:-600}"
fi

for lang in "${langs[@]}"; do
  mkdir -p "$stage/$lang"
  for name in "${names[@]}"; do
    if [ -n "$executed" ]; then
      src="$executed/$lang/$name.ipynb"
      [ -f "$src" ] || { echo "publish-notebooks: $src is missing (--executed wants DIR/{en,bn}/NAME.ipynb)" >&2; exit 1; }
      cp "$src" "$stage/$lang/$name.ipynb"
      continue
    fi
    echo "publish-notebooks: executing $lang/$name" >&2
    # The kernel starts in the notebook's folder (GoNB's GONB_DIR), which
    # gives the notebook its language; its runs go beside the page.
    (cd "$repo/notebooks/$lang" &&
      DRUTO_OUT="$stage/$lang/runs" "$PY" -m jupyter nbconvert --to notebook --execute \
        --ExecutePreprocessor.kernel_name=gonb --ExecutePreprocessor.timeout="$limit" \
        --output-dir "$stage/$lang" --output "$name" "$name.ipynb" 2>"$stage/$lang/.$name.log") || {
      echo "publish-notebooks: executing $lang/$name failed:" >&2
      tail -n 20 "$stage/$lang/.$name.log" >&2
      exit 1
    }
    rm -f "$stage/$lang/.$name.log"
  done
done

# Check the outputs (nbconvert does not fail on a panic in a GoNB cell), then
# export, link the pages to each other and write the index.
"$PY" - "$stage" "${names[@]}" <<'EOF'
import json, re, sys
stage, names = sys.argv[1], sys.argv[2:]
bad = []
titles = {}
for lang in ("en", "bn"):
    for name in names:
        path = f"{stage}/{lang}/{name}.ipynb"
        nb = json.load(open(path, encoding="utf-8"))
        n = 0
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "markdown" and (lang, name) not in titles:
                m = re.search(r"^#\s+(.+)$", src, re.M)
                if m:
                    titles[(lang, name)] = m.group(1).strip()
            if cell["cell_type"] != "code":
                continue
            n += 1
            if cell.get("execution_count") is None:
                bad.append(f"{lang}/{name} code cell {n} was not executed")
            for o in cell.get("outputs", []):
                text = o.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                if o["output_type"] == "error":
                    bad.append(f"{lang}/{name} code cell {n}: {o.get('ename')}: {o.get('evalue')}")
                elif o["output_type"] == "stream" and o.get("name") == "stderr" and (
                        "panic:" in text or "exit status" in text or "error" in text.lower()):
                    bad.append(f"{lang}/{name} code cell {n} wrote an error: {text.strip().splitlines()[0][:200]}")
if bad:
    print("publish-notebooks: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
json.dump({f"{l}/{n}": t for (l, n), t in titles.items()}, open(f"{stage}/.titles.json", "w"), ensure_ascii=False)
EOF

for lang in "${langs[@]}"; do
  files=()
  for name in "${names[@]}"; do files+=("$stage/$lang/$name.ipynb"); done
  "$PY" -m jupyter nbconvert --to html --log-level=WARN --output-dir "$stage/$lang" "${files[@]}"
done

"$PY" - "$stage" "${names[@]}" <<'EOF'
import html, json, re, sys
stage, names = sys.argv[1], sys.argv[2:]
titles = json.load(open(f"{stage}/.titles.json", encoding="utf-8"))
# Links between notebooks (href="04-benchmark.ipynb") point at the pages.
link = re.compile(r'href="(%s)\.ipynb"' % "|".join(map(re.escape, names)))
for lang in ("en", "bn"):
    for name in names:
        path = f"{stage}/{lang}/{name}.html"
        page = open(path, encoding="utf-8").read()
        page = link.sub(r'href="\1.html"', page)
        page = page.replace("<html>", f'<html lang="{lang}">', 1)
        open(path, "w", encoding="utf-8").write(page)
rows = []
for name in names:
    en, bn = titles.get(f"en/{name}", name), titles.get(f"bn/{name}", name)
    rows.append(f'<tr><td>{html.escape(name)}</td>'
                f'<td><a href="en/{name}.html">{html.escape(en)}</a></td>'
                f'<td lang="bn"><a href="bn/{name}.html">{html.escape(bn)}</a></td></tr>')
index = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>druto notebooks · druto নোটবুক</title>
<style>
body { font-family: "Noto Sans", "Noto Sans Bengali", sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; }
table { border-collapse: collapse; }
td, th { text-align: left; padding: 0.4em 1em 0.4em 0; vertical-align: top; }
</style>
</head>
<body>
<h1>druto notebooks <span lang="bn">· druto নোটবুক</span></h1>
<p>Each notebook in English and in Bangla, executed, with its outputs.
<span lang="bn">প্রতিটি নোটবুক ইংরেজি ও বাংলায়, চালানো অবস্থায়, আউটপুটসহ।</span></p>
<table>
<tr><th></th><th>English</th><th lang="bn">বাংলা</th></tr>
%s
</table>
</body>
</html>
""" % "\n".join(rows)
open(f"{stage}/index.html", "w", encoding="utf-8").write(index)
EOF
rm -f "$stage/.titles.json"
touch "$stage/$marker"

# Replace OUT only now that everything is written.
if [ -e "$out" ]; then
  old="$(mktemp -d "$(dirname "$out")/.$(basename "$out").old-XXXXXX")"
  mv "$out" "$old/"
  mv "$stage" "$out"
  rm -rf "$old"
else
  mv "$stage" "$out"
fi
trap - EXIT
echo "publish-notebooks: wrote $out/index.html and ${#names[@]} notebooks in en and bn" >&2
