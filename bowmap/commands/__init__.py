"""Subcommands of ``bowmap``: each module here (but ``options``) adds one.

A command module defines ``add_parser(subparsers)``, which adds its parser to the ``bowmap``
command's subparsers and returns the function that runs it (parsed arguments -> exit code).
Modules import their heavy dependencies inside that function, so ``bowmap --help`` stays fast.
"""
