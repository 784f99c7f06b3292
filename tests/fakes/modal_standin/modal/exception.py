"""The stand-in's `modal.exception` (the names of the SDK's own exception classes)."""


class Error(Exception):
    pass


class AuthError(Error):
    pass


class InvalidError(Error):
    pass


class NotFoundError(Error):
    pass


class SandboxTerminatedError(Error):
    pass
