"""The benchmark model zoo: names, input specs, and PyTorch builders (random weights, torch.manual_seed(0)).

The specs are plain Python (no torch import), so the harness's pure parts can be tested without torch.
"""
from dataclasses import dataclass

SEQ = 128  # sequence length of the text models
LLAMA_SEQ = 512  # the LLaMA-style decoder's prefill length


@dataclass(frozen=True)
class Spec:
    name: str
    kind: str  # "vision" (float input) or "text" (int64 token ids)
    input_name: str
    sample_shape: tuple  # the input's shape without the batch dim
    output_name: str
    large_batch: int  # the default large batch
    vocab: int = 0  # text models: token ids are drawn from [0, vocab)
    exporter: str = "torchscript"  # how export_zoo.py exports it: "torchscript" (opset 17) or "dynamo" (opset 18)

    def shape(self, batch):
        return (batch,) + tuple(self.sample_shape)

    def kiln_shapes(self, batch):
        """The --shapes argument of kiln, e.g. input:1x3x224x224."""
        return f"{self.input_name}:" + "x".join(str(d) for d in self.shape(batch))

    @property
    def float_input(self):
        return self.kind == "vision"

    def dynamic_axes(self):
        axes = {0: "batch", 1: "seq"} if self.kind == "text" else {0: "batch"}
        return {self.input_name: dict(axes), self.output_name: dict(axes)}


SPECS = {
    s.name: s
    for s in [
        Spec("resnet50", "vision", "input", (3, 224, 224), "output", 64),
        Spec("efficientnet_b0", "vision", "input", (3, 224, 224), "output", 64),
        Spec("vit_b_16", "vision", "input", (3, 224, 224), "output", 64),
        Spec("bert_base", "text", "input_ids", (SEQ,), "last_hidden_state", 32, vocab=30522),
        Spec("gpt2_small", "text", "input_ids", (SEQ,), "last_hidden_state", 32, vocab=50257),
        Spec("yolov8_style", "vision", "images", (3, 640, 640), "output", 64),
        # The widened zoo (issue 17): the architectures kiln was not tuned for.
        Spec("mobilenet_v3_large", "vision", "input", (3, 224, 224), "output", 64),
        Spec("convnext_tiny", "vision", "input", (3, 224, 224), "output", 64),
        Spec("swin_t", "vision", "input", (3, 224, 224), "output", 32),
        Spec("deit_small", "vision", "input", (3, 224, 224), "output", 64),
        Spec("regnet_y_800mf", "vision", "input", (3, 224, 224), "output", 64),
        Spec("densenet121", "vision", "input", (3, 224, 224), "output", 64),
        Spec("efficientnet_v2_s", "vision", "input", (3, 224, 224), "output", 64),
        # Inception-style blocks (four parallel branches each): the auxiliary streams' model (issue 17 item 6).
        Spec("googlenet", "vision", "input", (3, 224, 224), "output", 64),
        Spec("distilbert", "text", "input_ids", (SEQ,), "last_hidden_state", 32, vocab=30522),
        Spec("t5_encoder", "text", "input_ids", (SEQ,), "last_hidden_state", 32, vocab=32128),
        Spec("llama_decoder", "text", "input_ids", (LLAMA_SEQ,), "last_hidden_state", 4, vocab=32000,
             exporter="dynamo"),
    ]
}

TORCHVISION = ("resnet50", "efficientnet_b0", "vit_b_16", "mobilenet_v3_large", "convnext_tiny", "swin_t",
               "regnet_y_800mf", "densenet121", "efficientnet_v2_s", "googlenet")
HF_TEXT = ("bert_base", "gpt2_small", "distilbert", "t5_encoder", "llama_decoder")


def parse_models(arg):
    """'all' or a comma list -> list of names, in the zoo's order for 'all'; unknown names raise ValueError."""
    if arg in (None, "", "all"):
        return list(SPECS)
    names = [m.strip() for m in arg.split(",") if m.strip()]
    unknown = [m for m in names if m not in SPECS]
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(SPECS)}")
    return names


# ---- PyTorch builders (torch imported lazily) ----

def _hf_text_model(name, attn_impl):
    """A transformers text model with random weights, wrapped so forward(input_ids) returns last_hidden_state: BERT-base,
    GPT-2 small, DistilBERT, a T5-small encoder, and a LLaMA-style decoder (RMSNorm, RoPE, grouped-query attention with
    4 KV heads, SwiGLU; 8 layers of width 1024, about 0.2 B parameters with its embedding)."""
    import torch
    import transformers

    if name == "bert_base":
        cfg, cls, kwargs = transformers.BertConfig(), transformers.BertModel, {"add_pooling_layer": False}
    elif name == "distilbert":
        cfg, cls, kwargs = transformers.DistilBertConfig(), transformers.DistilBertModel, {}
    elif name == "t5_encoder":
        cfg, cls, kwargs = transformers.T5Config(), transformers.T5EncoderModel, {}
    elif name == "llama_decoder":
        cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                                       num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
        cls, kwargs = transformers.LlamaModel, {}
    else:
        cfg, cls, kwargs = transformers.GPT2Config(), transformers.GPT2Model, {}
    cfg.use_cache = False
    try:
        cfg._attn_implementation = attn_impl
    except Exception:  # noqa: BLE001 - older/newer configs guard the attribute; set_attn_implementation below
        pass
    model = cls(cfg, **kwargs)
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation(attn_impl)
        except Exception:  # noqa: BLE001 - keep the default; attn_impl below says which one runs
            pass
    call_kwargs = {"use_cache": False} if name == "gpt2_small" else {}

    class LastHidden(torch.nn.Module):
        # transformers 5 takes keyword arguments only; the wrapper gives the exporter one positional input.
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            if name == "gpt2_small":
                # With no attention mask, transformers 5 looks for packed sequences in position_ids through
                # indexing that the tracer bakes to the export's batch size; an all-ones mask (no padding, what a
                # serving stack passes) keeps the exported graph batch-generic.
                return self.m(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                              **call_kwargs).last_hidden_state
            return self.m(input_ids=input_ids, **call_kwargs).last_hidden_state

    wrapper = LastHidden(model)
    wrapper.attn_impl = getattr(model.config, "_attn_implementation", None) or attn_impl
    return wrapper


def build_model(name, attn_impl="sdpa"):
    """A fresh model in eval mode on the CPU, weights from torch.manual_seed(0)."""
    import torch

    if name not in SPECS:
        raise ValueError(f"unknown model {name}")
    torch.manual_seed(0)
    if name in TORCHVISION:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
    elif name == "deit_small":
        import timm

        model = timm.create_model("deit_small_patch16_224", pretrained=False)
    elif name in HF_TEXT:
        model = _hf_text_model(name, attn_impl)
    else:
        from yolov8_style import YOLOv8Style

        model = YOLOv8Style()
    return model.eval()


def make_input(spec, batch, device="cpu", dtype=None, seed=0):
    """A deterministic input: randn for vision (in `dtype`), token ids in [0, vocab) for text (int64)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    if spec.float_input:
        x = torch.randn(spec.shape(batch), generator=g)
        if dtype is not None:
            x = x.to(dtype)
    else:
        x = torch.randint(0, spec.vocab, spec.shape(batch), generator=g, dtype=torch.int64)
    return x.to(device)
