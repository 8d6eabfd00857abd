# Sourced by scripts/*: creates .venv once and installs the project into it.
# Re-installs only when pyproject.toml changed since the last install.
extra="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.installed${extra:+-$extra}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${extra:+[$extra]}"
  touch "$stamp"
fi
