# Sourced by the GPU-machine probes (bench/probe/*.sh run through the device tool from the repository root): unpacks
# the carried bundle (scripts/gpu-bundle) and sets the library path (torch's cuDNN, cuFFT and CUDA 13 libraries
# beside the bundle's), PY (the machine's python with torch) and K (the bundle's kiln).
tar xJf .bundle.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib:$NV/cufft/lib:$NV/cu13/lib
PY=/opt/torch/.venv/bin/python3
K=.bundle/bin/kiln
