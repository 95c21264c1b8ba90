"""The seed stage: a chunk's reads -> exact seeds -> FM search and locate -> candidate windows.

:mod:`.seeds` cuts reads into seeds and chooses which to locate; :mod:`.fm_search` owns the FM
kernels (``opencl/align/fm_search.cl``); :mod:`.filter` is the stage itself (:class:`SeedFilter`:
seeds to candidate windows, and the owner of ``opencl/align/seed_windows.cl``); :mod:`.residency`
keeps the index blocks on the device, or streams them through it under ``--device-mem``.
"""
