;;; fettle-ghost.el --- Fettle's ghost text in Emacs  -*- lexical-binding: t; -*-

;; Part of fettle.el (see its Commentary); loaded by it.

;;; Commentary:

;; Ghost text from `textDocument/inlineCompletion': `fettle-ghost-mode',
;; on in every buffer Fettle manages.  The suggestion is drawn after
;; point; TAB accepts it, M-f a word, M-e a line, M-n / M-p cycle, C-g
;; dismisses; typing what it says keeps the rest.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'eglot)
(require 'jsonrpc)
(require 'fettle)

(defcustom fettle-ghost-delay 0.05
  "Seconds without typing before asking for ghost text."
  :type 'number
  :group 'fettle)

(defface fettle-ghost-face '((t :inherit shadow))
  "Face of ghost text."
  :group 'fettle)

(defvar fettle-ghost-mode)

(defvar fettle-ghost-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'fettle-accept)
    (define-key map (kbd "<tab>") #'fettle-accept)
    (define-key map (kbd "M-f") #'fettle-accept-word)
    (define-key map (kbd "M-e") #'fettle-accept-line)
    (define-key map (kbd "M-n") #'fettle-next)
    (define-key map (kbd "M-p") #'fettle-previous)
    (define-key map (kbd "C-g") #'fettle-dismiss)
    map)
  "Keys while a suggestion is shown.")

(defvar-local fettle--ghost nil
  "The suggestion shown: a plist (:overlay :items :index :anchor
:before :after :tick :accepted).  `:anchor' is a marker where the
request was made, `:before'/`:after' the line's text around it then;
each item is (:text :prefix :closers :command), `:prefix' the
characters before the anchor that it replaces, `:closers' those after.")

(defvar-local fettle--ghost-visible nil
  "Non-nil while a suggestion is shown (activates `fettle-ghost-map').")

(defvar-local fettle--ghost-timer nil)
(defvar-local fettle--ghost-inflight nil "The id of the request in flight.")
(defvar-local fettle--ghost-tick nil "The buffer's tick after the last command.")

(defvar fettle-ghost-counters (list :requested 0 :drawn 0 :stale 0)
  "What ghost text did in this session (for tests and curiosity).")

(defvar fettle--ghost-emulation `((fettle--ghost-visible . ,fettle-ghost-map)))
(add-to-list 'emulation-mode-map-alists 'fettle--ghost-emulation)

(defun fettle--count (key)
  (setq fettle-ghost-counters
        (plist-put fettle-ghost-counters key (1+ (plist-get fettle-ghost-counters key)))))

(defun fettle--ghost-rest (state item)
  "What is left of ITEM to insert at point, or nil when it no longer fits."
  (let* ((anchor (plist-get state :anchor))
         (before (plist-get state :before))
         (after (plist-get state :after)))
    (when (and (marker-buffer anchor)
               (>= (point) anchor)
               (= (line-number-at-pos anchor) (line-number-at-pos))
               (string= before (buffer-substring-no-properties (line-beginning-position) anchor))
               (string= after (buffer-substring-no-properties (point) (line-end-position))))
      (let* ((start (- anchor (plist-get item :prefix)))
             (typed (buffer-substring-no-properties start (point)))
             (text (plist-get item :text)))
        (when (string-prefix-p typed text)
          (substring text (length typed)))))))

(defun fettle--ghost-draw (state rest)
  "Show REST (what is left of the current item) at point."
  (let* ((item (nth (plist-get state :index) (plist-get state :items)))
         (closers (buffer-substring-no-properties
                   (point) (min (line-end-position) (+ (point) (plist-get item :closers)))))
         (shown rest))
    ;; A one-line suggestion that re-types the closers after point: drawn
    ;; without them, so the closers on screen follow it as they will.
    (when (and (not (string-match-p "\n" rest)) (> (length closers) 0)
               (string-suffix-p closers rest))
      (setq shown (substring rest 0 (- (length rest) (length closers)))))
    (when (> (length (plist-get state :items)) 1)
      (setq shown (concat shown (propertize (format " (%d/%d)" (1+ (plist-get state :index))
                                                    (length (plist-get state :items)))
                                            'face 'shadow))))
    (let ((ov (or (plist-get state :overlay) (make-overlay (point) (point) nil t nil)))
          (text (copy-sequence shown)))
      (add-face-text-property 0 (length text) 'fettle-ghost-face t text)
      (when (> (length text) 0)
        ;; The cursor stays before the ghost text.
        (put-text-property 0 1 'cursor t text))
      (move-overlay ov (point) (point))
      (overlay-put ov 'after-string text)
      (overlay-put ov 'fettle-text rest)
      (overlay-put ov 'priority 100)
      (setq fettle--ghost (plist-put state :overlay ov)
            fettle--ghost-visible t))))

(defun fettle-dismiss ()
  "Hide the suggestion (and stop waiting for one)."
  (interactive)
  (fettle--ghost-hide)
  (fettle--ghost-cancel))

(defun fettle--ghost-hide ()
  (when-let ((ov (plist-get fettle--ghost :overlay)))
    (delete-overlay ov))
  (setq fettle--ghost nil
        fettle--ghost-visible nil))

(defun fettle--ghost-cancel ()
  "Stop the pending request and the one in flight."
  (when fettle--ghost-timer
    (cancel-timer fettle--ghost-timer)
    (setq fettle--ghost-timer nil))
  (when-let ((id fettle--ghost-inflight)
             (server (fettle--server t)))
    (setq fettle--ghost-inflight nil)
    (jsonrpc-notify server :$/cancelRequest (list :id id))))

(defun fettle--ghost-sync ()
  "Redraw the suggestion after a command; hide it when it no longer fits.
Returns non-nil while it is shown."
  (when fettle--ghost
    (let* ((state fettle--ghost)
           (item (nth (plist-get state :index) (plist-get state :items)))
           (rest (fettle--ghost-rest state item)))
      (if (and rest (not (string-empty-p rest)))
          (progn (fettle--ghost-draw state rest) t)
        (fettle--ghost-hide)
        nil))))

(defun fettle--ghost-items (result anchor)
  "The items of RESULT (an inline completion answer) for a request at ANCHOR."
  (let ((items (if (vectorp result) result (plist-get result :items)))
        (line (line-number-at-pos anchor))
        out)
    (seq-doseq (raw items)
      (let* ((text (plist-get raw :insertText))
             (text (if (stringp text) text (plist-get text :value)))
             (range (plist-get raw :range))
             (start (if range (eglot--lsp-position-to-point (plist-get range :start)) anchor))
             (end (if range (eglot--lsp-position-to-point (plist-get range :end)) anchor)))
        (when (and (stringp text) (not (string-empty-p text))
                   (<= start anchor) (>= end anchor)
                   (= (line-number-at-pos start) line) (= (line-number-at-pos end) line))
          (push (list :text (replace-regexp-in-string "\r\n" "\n" text)
                      :prefix (- anchor start) :closers (- end anchor)
                      :command (plist-get raw :command))
                out))))
    (nreverse out)))

(defun fettle--ghost-request (buffer &optional invoked cycling)
  "Ask for suggestions at point in BUFFER (several when INVOKED).
CYCLING is (:text TEXT :step STEP) when asked for alternatives to the
one suggestion shown, TEXT."
  (when (and (buffer-live-p buffer) (eq buffer (window-buffer (selected-window))))
    (with-current-buffer buffer
      (setq fettle--ghost-timer nil)
      (when-let ((server (fettle--server t)))
        (fettle--ghost-cancel)
        (eglot--signal-textDocument/didChange)
        (let* ((anchor (copy-marker (point)))
               (before (buffer-substring-no-properties (line-beginning-position) (point)))
               (after (buffer-substring-no-properties (point) (line-end-position)))
               (tick (buffer-chars-modified-tick))
               (id nil))
          (fettle--count :requested)
          (setq id
                (car (jsonrpc-async-request
                      server :textDocument/inlineCompletion
                      (append (eglot--TextDocumentPositionParams)
                              (list :context (list :triggerKind (if invoked 1 2))))
                      :success-fn
                      (lambda (result)
                        (when (buffer-live-p buffer)
                          (with-current-buffer buffer
                            (when (eql fettle--ghost-inflight id)
                              (setq fettle--ghost-inflight nil))
                            (fettle--ghost-answer result anchor before after tick cycling))))
                      :error-fn #'ignore
                      :timeout 30 :timeout-fn #'ignore)))
          (setq fettle--ghost-inflight id))))))

(defun fettle--ghost-answer (result anchor before after tick &optional cycling)
  "Show RESULT, asked at ANCHOR, if it still fits the buffer.
CYCLING: see `fettle--ghost-request'; the suggestion shown is replaced
by the first that differs from it."
  (let ((items (and result fettle-ghost-mode (fettle--ghost-items result anchor))))
    (when items
      (let* ((n (length items))
             (index (or (and cycling
                             (seq-find (lambda (i)
                                         (not (equal (plist-get (nth i items) :text)
                                                     (plist-get cycling :text))))
                                       (mapcar (lambda (k) (mod (* k (plist-get cycling :step)) n))
                                               (number-sequence 0 (1- n)))))
                        0))
             (state (list :anchor anchor :before before :after after :tick tick
                          :items items :index index :more (and cycling t)))
             (rest (and (eq (current-buffer) (window-buffer (selected-window)))
                        (or cycling (not fettle--ghost))
                        (fettle--ghost-rest state (nth index items)))))
        (if (or (null rest) (string-empty-p rest))
            (fettle--count :stale)
          (when (and cycling
                     (equal (plist-get (nth index items) :text) (plist-get cycling :text)))
            (message "Fettle: no other suggestion here"))
          (when fettle--ghost (fettle--ghost-hide))
          (fettle--ghost-draw state rest)
          (fettle--count :drawn))))))

(defun fettle--ghost-schedule ()
  (when fettle--ghost-timer (cancel-timer fettle--ghost-timer))
  (setq fettle--ghost-timer
        (run-with-timer fettle-ghost-delay nil #'fettle--ghost-request (current-buffer))))

(defconst fettle--ghost-commands
  '(fettle-accept fettle-accept-word fettle-accept-line fettle-next fettle-previous
    fettle-suggest)
  "Commands that manage the suggestion themselves.")

(defun fettle--ghost-post-command ()
  "After each command: keep, redraw or hide the suggestion; ask after typing."
  (let ((changed (not (eql fettle--ghost-tick (buffer-chars-modified-tick)))))
    (setq fettle--ghost-tick (buffer-chars-modified-tick))
    (unless (memq this-command fettle--ghost-commands)
      (cond
       ((and fettle--ghost (fettle--ghost-sync)) nil)
       (t (fettle--ghost-hide)
          ;; Typing asks; undoing (often of an accepted suggestion) does not.
          (if (and changed (not (minibufferp)) (not buffer-read-only)
                   (not (memq this-command '(undo undo-only undo-redo undo-tree-undo
                                                  undo-tree-redo undo-fu-only-undo
                                                  evil-undo))))
              (fettle--ghost-schedule)
            (fettle--ghost-cancel)))))))

(defun fettle--ghost-accept (pick)
  "Insert what PICK chooses of the rest (all of it when PICK is nil)."
  (if (not (fettle--ghost-sync))
      (when (eq this-command 'fettle-accept)
        ;; Nothing shown: the key does what it does without Fettle (never
        ;; this command again, should the user have bound it globally).
        (let* ((fettle--ghost-visible nil)
               (command (key-binding (this-command-keys))))
          (call-interactively (if (memq command '(nil fettle-accept))
                                  #'indent-for-tab-command
                                command))))
    (let* ((state fettle--ghost)
           (item (nth (plist-get state :index) (plist-get state :items)))
           (rest (fettle--ghost-rest state item))
           (part (if pick (funcall pick rest) rest))
           (whole (= (length part) (length rest))))
      (unless (plist-get state :accepted)
        (when-let ((command (plist-get item :command))
                   (server (fettle--server t)))
          (fettle--execute server (plist-get command :command)
                           (or (plist-get command :arguments) []))))
      (fettle--ghost-hide)
      (undo-boundary)
      (when whole
        (delete-region (point) (min (line-end-position) (+ (point) (plist-get item :closers)))))
      (insert part)
      (setq fettle--ghost-tick (buffer-chars-modified-tick))
      (if whole
          (fettle--ghost-schedule)
        ;; Keep showing the rest of this item.
        (let ((left (list :anchor (copy-marker (point))
                          :before (buffer-substring-no-properties (line-beginning-position) (point))
                          :after (buffer-substring-no-properties (point) (line-end-position))
                          :items (list (list :text (substring rest (length part))
                                             :prefix 0 :closers (plist-get item :closers)
                                             :command nil))
                          :index 0 :accepted t)))
          (fettle--ghost-draw left (substring rest (length part))))))))

(defun fettle-accept ()
  "Accept the whole suggestion (or insert a TAB's usual text without one)."
  (interactive)
  (fettle--ghost-accept nil))

(defun fettle-accept-word ()
  "Accept the suggestion's next word."
  (interactive)
  (fettle--ghost-accept
   (lambda (rest)
     (if (string-match "\\`\\(?:\n[ \t]*\\|[ \t]*[[:alnum:]_]+\\|[ \t]*[^[:alnum:]_ \t\n]+\\|[ \t]+\\)" rest)
         (match-string 0 rest)
       rest))))

(defun fettle-accept-line ()
  "Accept the rest of the suggestion's line (at its end, the next line)."
  (interactive)
  (fettle--ghost-accept
   (lambda (rest)
     (string-match "\\`\n?[^\n]*" rest)
     (match-string 0 rest))))

(defun fettle--ghost-cycle (step)
  (if (not (fettle--ghost-sync))
      (fettle--ghost-request (current-buffer) t)
    (let* ((state fettle--ghost)
           (n (length (plist-get state :items))))
      (if (and (< n 2) (not (plist-get state :more)))
          ;; One suggestion shown (made while typing): ask for
          ;; alternatives; it stays until they come.
          (fettle--ghost-request
           (current-buffer) t
           (list :text (plist-get (nth (plist-get state :index) (plist-get state :items)) :text)
                 :step step))
      (catch 'shown
        (dotimes (_ n)
          (plist-put state :index (mod (+ (plist-get state :index) step) n))
          (let ((rest (fettle--ghost-rest state (nth (plist-get state :index)
                                                     (plist-get state :items)))))
            (when (and rest (not (string-empty-p rest)))
              (fettle--ghost-draw state rest)
              (throw 'shown t)))))))))

(defun fettle-next ()
  "Show the next suggestion (ask for several when none is shown)."
  (interactive)
  (fettle--ghost-cycle 1))

(defun fettle-previous ()
  "Show the previous suggestion."
  (interactive)
  (fettle--ghost-cycle -1))

(defun fettle-suggest ()
  "Ask for suggestions at point now."
  (interactive)
  (fettle--ghost-request (current-buffer) t))

(defvar fettle-ghost-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "M-n") #'fettle-next)
    (define-key map (kbd "M-p") #'fettle-previous)
    map)
  "Keys of `fettle-ghost-mode': M-n / M-p ask for suggestions when none is
shown (and cycle through them when one is).")

(define-minor-mode fettle-ghost-mode
  "Ghost text from Fettle while typing."
  :lighter nil
  (if fettle-ghost-mode
      (progn
        (setq fettle--ghost-tick (buffer-chars-modified-tick))
        (add-hook 'post-command-hook #'fettle--ghost-post-command nil t))
    (remove-hook 'post-command-hook #'fettle--ghost-post-command t)
    (fettle-dismiss)))

(defun fettle--managed ()
  "Turn ghost text on in buffers Fettle manages."
  (if (and (eglot-managed-p) (fettle--server t)
           (eglot--server-capable :inlineCompletionProvider))
      (fettle-ghost-mode 1)
    (when fettle-ghost-mode (fettle-ghost-mode -1))))

(add-hook 'eglot-managed-mode-hook #'fettle--managed)

(provide 'fettle-ghost)
;;; fettle-ghost.el ends here
