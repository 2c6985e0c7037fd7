"""Other tools' config formats, read as their users write them and translated to evalkit's before validation."""
