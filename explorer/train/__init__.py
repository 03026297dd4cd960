"""What every offline trainer shares (EESD section 3.2's self-distillation data and the run mechanics).

``data``        the prompt bank (``assets/train_prompts.json``) and the target's own answers to it,
                generated in batches and cached on disk
``features``    the target's hidden states and top-k distributions over packed windows of that data
``checkpoint``  resumable runs: one checkpoint format
``split``       the train and held-out data a distillation trainer reads: answers, windows, frozen features
``loop``        the training loop once a trainer's loss is written: AdamW, the schedule, clipping, checkpoints,
                progress (the exit layer's and the feature head's)

The trainers themselves live with their methods: ``methods.eesd.train_exit`` (the exit layer),
``methods.eesd.train_theta`` (cali-ts's θ_M) and ``methods.bita.train`` (BiTA's prompt and mask tokens).
"""
