"""What a human reads: the notification, WHAT HAPPENS NEXT, how loudly it is sent, each channel's
bounds, and the notice of HyperPod's own hang verdicts."""
