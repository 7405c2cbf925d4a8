"""Hugging Face `transformers` models as users bring them: built from their configs (random
weights, nothing downloaded) at their real hidden sizes, encoders cut to one layer for time,
imported with ember.frontend.from_pytorch, built at opt level 3 and compared with eager
(within 1e-4 of the output's scale). The BERT family's embeddings gather their token-type
ids (aten.gather); wav2vec2 and PoolFormer have group norms (aten.native_group_norm) and
wav2vec2 a weight-norm parametrization (aten.linalg_vector_norm); EfficientNet's head pools
with a ceil-mode window larger than its input; Swin's window indices take int64 fmod;
MobileViT resizes its feature maps to whole patches and back (aten.upsample_bilinear2d);
MobileViTV2 folds its patches back with nn.Fold (aten.col2im); Phi-3 rotates all of each
head (partial rotary at rotary_dim == head_dim: the pass-through slice is empty); Mixtral's
mixture-of-experts layer sorts its routing (aten.sort), counts tokens per expert
(aten.histc), inverts a permutation (aten.index_put), divides integers (aten.floor_divide)
and multiplies each expert's rows (transformers::grouped_mm_fallback); VideoMAE embeds
16 frames with a Conv3d (aten.conv3d, run as a 2-D convolution)."""
import numpy as np
import pytest
import torch

import ember

transformers = pytest.importorskip("transformers")
import hf_zoo  # noqa: E402  (the zoo's architectures: config, layers, input)


# The zoo's families with something of their own to check (benchmarks/zoo.py has them all).
FAMILIES = ["bert", "roberta", "albert", "wav2vec2", "poolformer", "efficientnet", "swin",
            "mobilevit", "mobilevit_v2", "phi3", "mixtral", "videomae", "bit"]


@pytest.mark.parametrize("family", FAMILIES)
def test_model_imports_and_matches_eager(family):
    model, x = hf_zoo.make(family, 1)
    with torch.no_grad():
        want = model(x).numpy()
    mod, params = ember.frontend.from_pytorch(model, (x,))
    got = np.asarray(ember.GraphModule(ember.build(mod, params=params))(x=x.numpy()))
    assert got.shape == want.shape
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-4, f"{family}: max error {err:.2e} of the output's scale"


def test_bert_with_attention_mask_and_token_types_as_inputs():
    """As BERT is called for real: padded rows (the mask transformers builds from
    attention_mask indexes it by broadcast batch and key positions: adv_index) and two
    segments of token types, all three as inputs."""
    config = transformers.BertConfig(num_hidden_layers=1)
    torch.manual_seed(0)

    class Full(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config)

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids)[0]

    model = Full().eval()
    ids = torch.randint(3, config.vocab_size, (2, 128))
    mask = torch.ones(2, 128, dtype=torch.long)
    mask[1, 100:] = 0
    types = torch.zeros(2, 128, dtype=torch.long)
    types[:, 64:] = 1
    with torch.no_grad():
        want = model(ids, mask, types).numpy()
    mod, params = ember.frontend.from_pytorch(model, (ids, mask, types))
    m = ember.GraphModule(ember.build(mod, params=params))
    got = np.asarray(m(input_ids=ids.numpy(), attention_mask=mask.numpy(),
                       token_type_ids=types.numpy()))
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    # Another mask through the same build: the mask is an input, not a constant.
    mask[0, 50:] = 0
    with torch.no_grad():
        want = model(ids, mask, types).numpy()
    got = np.asarray(m(input_ids=ids.numpy(), attention_mask=mask.numpy(),
                       token_type_ids=types.numpy()))
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
