"""Modalities as plug-ins: what a card's `modality` changes in the data's handling, one module each.

A module defining ``MODALITY`` (a ModalityPlugin, tasks/modalities/base.py) is one modality, named by the
card's `modality` field: the table, text, multimodal sensor streams and images ship here. A package
named in AUTOML_EVAL_PLUGINS adds more the same way (docs/extending/modality.md).
"""
