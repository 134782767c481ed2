"""Exports of a run's model for other libraries and runtimes (``attnkit export``), and
running them back: ``hf_dir`` (a Hugging Face directory with the tokenizer, for the models
whose ``save_pretrained`` writes Hugging Face's format), ``onnx`` (checked against
onnxruntime), ``quantize`` (int8 weights). Which formats a model has is its own
declaration (``AttnkitModel.export_formats``); the Hugging Face names themselves live
with the models (``attnkit.models.hf_bert``, ``attnkit.models.hf_gpt2``).
"""
