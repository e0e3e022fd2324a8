"""The run's record: its layout on disk, its lines, the Recorder that alone writes them, and the attempts a later run goes on from."""
