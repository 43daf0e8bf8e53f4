#!/usr/bin/env bash
# Regenerates this corpus: a pinned JAX in its own environment, then generate.py.
# The outputs are committed; tests never run Python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${TESSEL_JAX_VENV:-/tmp/tessel-jax-corpus}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "jax==0.10.2" "jaxlib==0.10.2" "numpy==2.4.6" "safetensors==0.8.0"
fi
"$venv/bin/python" "$here/generate.py"
