"""TL0xx, torchlint's own findings: files it could not analyse, `# noqa` comments that suppress nothing."""
