"""The image modality: the card's `image:` block, PNG encoding and content hashes, the gate's checks."""
