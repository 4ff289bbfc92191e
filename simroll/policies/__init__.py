"""Policies: the verbs every policy has, and learned (LeRobot) policies run in simroll envs.

Every policy the episode engine runs offers ``reset()`` and ``select_action(obs) -> action``
(:mod:`simroll.policies.base` states that contract and the optional abilities as Protocols;
LeRobot's verbs; learned policies keep their own action-chunk queue and also offer
``predict_action_chunk`` and ``forward(batch) -> loss``). Policies see observations only, never
the simulator; the privileged scripted experts live in ``simroll.experts``.
"""
