from speech.whisper.layers.attention import MultiHeadAttention, ResidualAttentionBlock

__all__ = ["MultiHeadAttention", "ResidualAttentionBlock"]
