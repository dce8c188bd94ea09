"""Tasks for tests/envs/test_kernels.py, importable by the kernel build's child process (on PYTHONPATH)."""

from __future__ import annotations

from rlrun.envs.cartpole import CartPoleVectorEnv


class UnexportableCartPole(CartPoleVectorEnv):
    """A cart-pole whose `dynamics` branch on data, which `torch.export` refuses: its build fails."""

    @staticmethod
    def dynamics(components, actions, k):
        if bool(components[0].sum() > 0):  # data-dependent control flow
            components = -components
        return CartPoleVectorEnv.dynamics(components, actions, k)


class InPlaceCartPole(CartPoleVectorEnv):
    """A cart-pole whose `dynamics` also writes the next state into its input: the build's check refuses it."""

    @staticmethod
    def dynamics(components, actions, k):
        obs, reward, terminated, state = CartPoleVectorEnv.dynamics(components, actions, k)
        components.copy_(state)
        return obs, reward, terminated, state
