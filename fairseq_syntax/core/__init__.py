"""What every method shares: trees and input forms, batched structure tensors, the attention base, the encoder,
model and classifier bases, side inputs and their collation, the data directory format, the tasks and the
criterion. Nothing here imports a method folder."""
