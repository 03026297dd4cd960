"""Offline trainers and the self-generated data they learn from (EESD section 3.2).

``data``        the prompt bank (``assets/train_prompts.json``) and the target's own answers to it,
                generated in batches and cached on disk.
``early_exit``  the EESD exit-layer trainer (sections 3.1-3.2): artifacts in ``assets/early-exit/``.
"""
