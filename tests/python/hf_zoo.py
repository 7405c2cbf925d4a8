"""The Hugging Face `transformers` architectures of the zoo (benchmarks/zoo.py; the test
suite's slice is tests/python/test_transformers.py): each built from its config with random
weights (nothing downloaded) at the config's hidden sizes, transformer stacks cut to a given
number of layers, and the input it takes at batch 1."""
import torch


def tokens(config):
    return torch.randint(3, min(config.vocab_size, 30000), (1, 128))


def image(config):
    return torch.randn(1, 3, 224, 224)


def video(config):
    return torch.randn(1, config.num_frames, 3, config.image_size, config.image_size)


def audio(config):
    return torch.randn(1, 16000)


def mel(config):
    return torch.randn(1, config.num_mel_bins, 3000)


def layers(key):
    return lambda n: {key: n}


# name -> (config class, model class, config overrides(layers), input name, input maker,
#          output index, encoder only)
ZOO = {
    "bert": ("BertConfig", "BertModel", layers("num_hidden_layers"), "input_ids", tokens),
    "roberta": ("RobertaConfig", "RobertaModel", layers("num_hidden_layers"), "input_ids",
                tokens),
    "albert": ("AlbertConfig", "AlbertModel", layers("num_hidden_layers"), "input_ids", tokens),
    "deberta_v2": ("DebertaV2Config", "DebertaV2Model",  # DeBERTa-v3-base's sizes
                   lambda n: {"num_hidden_layers": n, "hidden_size": 768,
                              "intermediate_size": 3072, "num_attention_heads": 12},
                   "input_ids", tokens),
    "distilbert": ("DistilBertConfig", "DistilBertModel", layers("n_layers"), "input_ids",
                   tokens),
    "gpt2": ("GPT2Config", "GPT2Model", layers("n_layer"), "input_ids", tokens),
    "llama": ("LlamaConfig", "LlamaModel",  # grouped-query attention: 8 key/value heads
              lambda n: {"num_hidden_layers": n, "hidden_size": 2048, "intermediate_size": 5632,
                         "num_attention_heads": 32, "num_key_value_heads": 8}, "input_ids",
              tokens),
    "qwen2": ("Qwen2Config", "Qwen2Model", layers("num_hidden_layers"), "input_ids", tokens),
    "phi": ("PhiConfig", "PhiModel", layers("num_hidden_layers"), "input_ids", tokens),
    "mixtral": ("MixtralConfig", "MixtralModel",  # a mixture-of-experts layer (8 experts, top 2)
                lambda n: {"num_hidden_layers": 1, "hidden_size": 1024,
                           "intermediate_size": 3584, "num_attention_heads": 16,
                           "num_key_value_heads": 8}, "input_ids", tokens),
    "phi3": ("Phi3Config", "Phi3Model", layers("num_hidden_layers"), "input_ids", tokens),
    "gemma2": ("Gemma2Config", "Gemma2Model",  # attention soft-capping; 32000 tokens, not
               # 256000 (a 2.4 GB embedding table that only gathers)
               lambda n: {"num_hidden_layers": n, "vocab_size": 32000}, "input_ids", tokens),
    "t5_encoder": ("T5Config", "T5EncoderModel", layers("num_layers"), "input_ids", tokens),
    "bart_encoder": ("BartConfig", "BartModel", layers("encoder_layers"), "input_ids", tokens,
                     0, True),
    "whisper_encoder": ("WhisperConfig", "WhisperModel", layers("encoder_layers"),
                        "input_features", mel, 0, True),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", layers("num_hidden_layers"), "input_values",
                 audio),
    "vit": ("ViTConfig", "ViTModel", layers("num_hidden_layers"), "pixel_values", image),
    "dinov2": ("Dinov2Config", "Dinov2Model", layers("num_hidden_layers"), "pixel_values", image),
    "clip_vision": ("CLIPVisionConfig", "CLIPVisionModel", layers("num_hidden_layers"),
                    "pixel_values", image),
    "swin": ("SwinConfig", "SwinModel", lambda n: {}, "pixel_values", image),
    "swinv2": ("Swinv2Config", "Swinv2Model", lambda n: {}, "pixel_values", image),
    "convnext": ("ConvNextConfig", "ConvNextModel", lambda n: {}, "pixel_values", image),
    "convnext_v2": ("ConvNextV2Config", "ConvNextV2Model", lambda n: {}, "pixel_values", image),
    "levit": ("LevitConfig", "LevitModel", lambda n: {}, "pixel_values", image),
    "resnet": ("ResNetConfig", "ResNetModel", lambda n: {}, "pixel_values", image),
    "regnet": ("RegNetConfig", "RegNetModel", lambda n: {}, "pixel_values", image),
    "mobilenet_v2": ("MobileNetV2Config", "MobileNetV2Model", lambda n: {}, "pixel_values",
                     image),
    "mobilevit": ("MobileViTConfig", "MobileViTModel", lambda n: {}, "pixel_values", image),
    "mobilevit_v2": ("MobileViTV2Config", "MobileViTV2Model", lambda n: {}, "pixel_values",
                     image),
    "efficientnet": ("EfficientNetConfig", "EfficientNetModel", lambda n: {}, "pixel_values",
                     image, 1),
    "bit": ("BitConfig", "BitModel", lambda n: {}, "pixel_values", image),  # standardized convs
    "dpt_hybrid": ("DPTConfig", "DPTModel",  # a BiT backbone under a ViT, 384 x 384
                   lambda n: {"is_hybrid": True, "num_hidden_layers": n}, "pixel_values",
                   lambda c: torch.randn(1, 3, c.image_size, c.image_size)),
    "poolformer": ("PoolFormerConfig", "PoolFormerModel", lambda n: {}, "pixel_values", image),
    "segformer": ("SegformerConfig", "SegformerModel", lambda n: {}, "pixel_values", image),
    "mask2former": ("Mask2FormerConfig", "Mask2FormerModel",  # deformable attention samples
                    lambda n: {}, "pixel_values", image),   # with F.grid_sample
    "videomae": ("VideoMAEConfig", "VideoMAEModel", layers("num_hidden_layers"),  # a Conv3d
                 "pixel_values", video),                                      # tubelet embedding
}


class OneOutput(torch.nn.Module):
    def __init__(self, model, input_name, output):
        super().__init__()
        self.model, self.input_name, self.output = model, input_name, output

    def forward(self, x):
        return self.model(**{self.input_name: x})[self.output]


def make(name, n_layers):
    import transformers
    entry = ZOO[name] + (0, False)[len(ZOO[name]) - 5:]
    config_name, model_name, overrides, input_name, make_input, output, encoder = entry
    config = getattr(transformers, config_name)(**overrides(n_layers))
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config)
    if encoder:
        model = model.get_encoder()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return OneOutput(model, input_name, output).eval(), make_input(config)
