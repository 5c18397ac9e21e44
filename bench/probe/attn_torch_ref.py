# Reference timings of PyTorch's fused attention kernels at BERT-base's attention shape (batch 32, 12 heads,
# sequence 128, head 64, float16), with and without a [B, 1, 1, S] additive mask: what the card's libraries reach.
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
B, H, S, D = 32, 12, 128, 64
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
mask = torch.zeros(B, 1, 1, S, device="cuda", dtype=torch.float16)
mask[:, :, :, 100:] = -10000.0
def bench(fn, iters=500):
    for _ in range(20): fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(20): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(iters // 20): g.replay()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / (iters // 20 * 20)
for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                 ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
    for m in [None, mask]:
        try:
            with sdpa_kernel(be):
                t = bench(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m))
            print(f"{name:10s} mask={'yes' if m is not None else 'no '} {t*1000:.1f} us")
        except Exception as ex:
            print(f"{name:10s} mask={'yes' if m is not None else 'no '} unsupported: {str(ex).splitlines()[0][:80]}")
# memory floor: read q, k, v, write o
bytes_ = 4 * B * H * S * D * 2
print(f"bytes moved (q,k,v,o once): {bytes_/1e6:.1f} MB")
