;;; fettle.el --- Fettle, a code agent, through eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9") (jsonrpc "1.0.14"))
;; Keywords: tools, languages, convenience
;; URL: https://github.com/fettle/fettle

;;; Commentary:

;; Fettle is a language server with a code agent inside.  This package
;; registers it with eglot and adds what eglot lacks for it:
;;
;; - ghost text from `textDocument/inlineCompletion' (`fettle-ghost-mode',
;;   on in every buffer Fettle manages): the suggestion is drawn after
;;   point, TAB accepts it, M-f a word, M-e a line, M-n / M-p cycle (with
;;   one suggestion shown they ask for alternatives; with none, for
;;   suggestions), C-g dismisses; typing what it says keeps the rest;
;; - `fettle-chat' (a conversation in `*fettle-chat*': a follow-up
;;   continues it, C-u starts a new one), `fettle-rewrite', `fettle-fix', `fettle-undo',
;;   `fettle-cancel', `fettle-stats', `fettle-log', `fettle-diff', all
;;   asynchronous (eglot's own `eglot-execute-command' waits for the
;;   answer, and a task takes minutes: Emacs would freeze meanwhile);
;;   Fettle's code actions (`eglot-code-actions') run asynchronously too;
;; - the agent's `fettle/taskEvent' notifications in `*fettle-log*'.
;;
;; Setup:
;;
;;   (require 'fettle)
;;   (fettle-register)           ; Fettle for `fettle-modes' in eglot
;;   (add-hook 'python-mode-hook #'eglot-ensure)
;;
;; Eglot runs one server per buffer.  To keep your language's own server
;; (pyright, rust-analyzer, ...) beside Fettle, run both behind an LSP
;; multiplexer (e.g. rassumfrassum: `rass -- pyright-langserver --stdio
;; -- fettle'), or use lsp-mode for the language and eglot for Fettle.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'eglot)
(require 'jsonrpc)

(defgroup fettle nil
  "Fettle: a code agent inside the LSP client."
  :group 'tools
  :prefix "fettle-")

(defcustom fettle-command '("fettle")
  "The server's command line."
  :type '(repeat string))

(defcustom fettle-modes
  '(python-mode python-ts-mode rust-mode rust-ts-mode js-mode js-ts-mode
    typescript-mode typescript-ts-mode go-mode go-ts-mode c-mode c++-mode
    java-mode lua-mode ruby-mode sh-mode)
  "Major modes whose buffers `fettle-register' gives to Fettle."
  :type '(repeat symbol))

(defcustom fettle-settings nil
  "Fettle's configuration, sent as `initializationOptions'.
A plist with keyword keys, as in fettle.toml: e.g.
  (:completion (:model \"local\") :agent (:test_command \"pytest -q\"))"
  :type 'sexp)

(defcustom fettle-task-timeout 960
  "Seconds to wait for a task (chat, fix) or a rewrite to answer.
Longer than Fettle's own `agent.timeout_s' (900 s by default)."
  :type 'integer)

(defcustom fettle-confirm-edits nil
  "Whether eglot asks before applying Fettle's edits.
Fettle asks itself when its `edit.confirm' says so; every edit is
one `undo' away."
  :type 'boolean)

(defcustom fettle-show-progress t
  "Non-nil: echo a running task's progress, a line at a time.
Its status and verification events are shown in the echo area while
`*fettle-log*' (which has every event) is not in a window."
  :type 'boolean
  :group 'fettle)

(defcustom fettle-ghost-delay 0.05
  "Seconds without typing before asking for ghost text."
  :type 'number)

(defface fettle-ghost-face '((t :inherit shadow))
  "Face of ghost text.")

(defclass fettle-server (eglot-lsp-server) ()
  :documentation "Eglot's connection to Fettle.")

;;;###autoload
(defun fettle-register ()
  "Make eglot start Fettle for `fettle-modes'."
  (setq eglot-server-programs
        (cons (cons fettle-modes (cons 'fettle-server fettle-command))
              (cl-remove-if (lambda (entry)
                              (and (consp (cdr entry)) (eq (cadr entry) 'fettle-server)))
                            eglot-server-programs))))

(cl-defmethod eglot-initialization-options ((_server fettle-server))
  (or fettle-settings eglot--{}))

(defun fettle--server (&optional quiet)
  "The Fettle server of this buffer, or an error (nil if QUIET)."
  (let ((server (eglot-current-server)))
    (cond ((and server (cl-typep server 'fettle-server)) server)
          (quiet nil)
          (t (user-error "Fettle is not managing this buffer (M-x eglot, after `fettle-register')")))))

;;; Asynchronous commands

(defvar fettle--last-result nil
  "The result of the last task that ended.")

(defvar fettle--last-change nil
  "The result of the last task that changed files (for `fettle-diff').")

(defun fettle--execute (server command argument &optional on-result on-error)
  "Run COMMAND with ARGUMENT on SERVER; call ON-RESULT with its answer.
ON-ERROR, if given, is called with the error's message too."
  (when (eglot-managed-p)
    (eglot--signal-textDocument/didChange))
  (jsonrpc-async-request
   server :workspace/executeCommand
   (list :command command :arguments (if (vectorp argument) argument (vector argument)))
   :success-fn (lambda (result) (when on-result (funcall on-result result)))
   :error-fn (lambda (err)
               (let ((text (format "%s" (or (plist-get err :message) err))))
                 (message "Fettle: %s" text)
                 (when on-error (funcall on-error text))))
   :timeout fettle-task-timeout
   :timeout-fn (lambda ()
                 (message "Fettle: %s had no answer after %d s" command fettle-task-timeout))))

(cl-defmethod eglot-execute-command ((server fettle-server) command arguments)
  "Run Fettle's COMMAND without waiting: code actions carry rewrites."
  (fettle--execute server (format "%s" command) (or arguments []) #'fettle--report))

(cl-defmethod eglot-handle-request
  ((_server fettle-server) (_method (eql workspace/applyEdit)) &key _label edit)
  "Apply Fettle's edit (see `fettle-confirm-edits'), and say so at once.
Eglot sends `didChange' when Emacs is next idle; the agent waits for
it to know the edit landed, so it goes now."
  (eglot--apply-workspace-edit edit fettle-confirm-edits)
  (seq-doseq (change (plist-get edit :documentChanges))
    (when-let ((path (eglot--uri-to-path (plist-get (plist-get change :textDocument) :uri)))
               (buffer (find-buffer-visiting path)))
      (with-current-buffer buffer
        (when (eglot-managed-p)
          (eglot--signal-textDocument/didChange)))))
  `(:applied t))

(cl-defmethod eglot-client-capabilities ((_server fettle-server))
  "Eglot's capabilities, and that Emacs saves the buffers Fettle edits."
  (let ((caps (cl-call-next-method)))
    (plist-put caps :experimental '(:fettle (:saveDocuments t)))))

(defun fettle--save-buffer (buffer)
  "Save BUFFER for Fettle; nil, or why it was not saved."
  (with-current-buffer buffer
    (cond
     (buffer-read-only "the buffer is read-only")
     (t
      ;; Fettle asks only for files whose text on disk it manages at that
      ;; moment: a changed file on disk is no reason to ask (nor, in
      ;; batch mode, to fail).
      (unless (verify-visited-file-modtime buffer)
        (set-visited-file-modtime))
      (condition-case err
          (let ((save-silently t) (inhibit-message t))
            (basic-save-buffer)
            (when (buffer-modified-p) "the buffer is still modified after saving it"))
        (error (error-message-string err)))))))

(cl-defmethod eglot-handle-request
  ((_server fettle-server) (_method (eql fettle/saveDocuments)) &key uris)
  "Save the buffers Fettle edited, so Emacs knows they are saved."
  (let (saved failed)
    (seq-doseq (uri uris)
      (let* ((buffer (find-buffer-visiting (eglot--uri-to-path uri)))
             (why (if buffer (fettle--save-buffer buffer) "not open in Emacs")))
        (if why
            (push (list :uri uri :message why) failed)
          (push uri saved))))
    (list :saved (vconcat (nreverse saved)) :failed (vconcat (nreverse failed)))))

(defun fettle--report (result)
  "Show the end of a task or rewrite (RESULT), keep it for `fettle-diff'."
  (when (listp result)
    (cond
     ((plist-member result :applied)
      (message "Fettle: %s" (plist-get result :summary)))
     ((plist-get result :status)
      (setq fettle--last-result result)
      ;; `fettle-diff' shows the last change: a follow-up that only
      ;; answered must not hide it.
      (when (> (length (plist-get result :changedFiles)) 0)
        (setq fettle--last-change result))
      (let ((changed (length (plist-get result :changedFiles))))
        (message "Fettle: %s — %s%s" (plist-get result :status)
                 (string-trim (or (plist-get result :summary) ""))
                 (if (> changed 0)
                     (format " (%d file%s changed: M-x fettle-diff shows it, M-x fettle-undo restores it)"
                             changed (if (= changed 1) "" "s"))
                   "")))))))

(defun fettle--whole-lines (beg end)
  "The LSP range of the whole lines from BEG to END."
  (save-excursion
    (let ((start (progn (goto-char beg) (line-beginning-position)))
          (stop (progn (goto-char end)
                       (if (and (bolp) (> end beg)) (point) (line-beginning-position 2)))))
      (list :start (eglot--pos-to-lsp-position start)
            :end (eglot--pos-to-lsp-position stop)))))

;;;###autoload
(defun fettle-rewrite (beg end instruction)
  "Rewrite the lines from BEG to END as INSTRUCTION says."
  (interactive
   (let ((region (if (use-region-p) (list (region-beginning) (region-end))
                   (list (line-beginning-position) (line-end-position)))))
     (append region (list (read-string "Fettle rewrite: ")))))
  (when (string-empty-p (string-trim instruction))
    (user-error "Fettle: say what to change"))
  (let ((server (fettle--server)))
    (deactivate-mark)
    (fettle--execute server "fettle.rewrite"
                     (list :uri (eglot--path-to-uri (buffer-file-name))
                           :range (fettle--whole-lines beg end)
                           :instruction instruction
                           :version eglot--versioned-identifier)
                     #'fettle--report)
    (message "Fettle: rewriting…")))

(defvar fettle--chat-turns 0
  "Chats finished in this conversation (a follow-up continues it).")

(defvar fettle--chat-running nil
  "While a chat runs: a plist (:task ID), ID nil until its first event.")

(defvar fettle--chat-streaming nil
  "Non-nil while the conversation's last line is the model's streamed text.")

;;;###autoload
(defun fettle-chat (message &optional beg end new)
  "Run the repair loop with MESSAGE as its goal; the region is its focus.
It continues the conversation in `*fettle-chat*' (the model is told the
earlier requests, their results and changes), unless NEW (a prefix
argument, \\[universal-argument]) starts a new one."
  (interactive
   (let ((region (when (use-region-p) (list (region-beginning) (region-end)))))
     (list (read-string (if (and (not current-prefix-arg) (> fettle--chat-turns 0))
                            "Fettle chat (follow-up): "
                          "Fettle chat: "))
           (car region) (cadr region) current-prefix-arg)))
  (when (string-empty-p (string-trim message))
    (user-error "Fettle: say what to do, e.g. make the tests pass"))
  (let* ((continued (and (not new) (> fettle--chat-turns 0)))
         (argument (list :message message
                         :uri (eglot--path-to-uri (buffer-file-name))
                         :continue (if continued t :json-false))))
    (when (and beg end)
      (setq argument (append argument (list :range (fettle--whole-lines beg end)))))
    (fettle--chat-begin message continued)
    (fettle--execute (fettle--server) "fettle.chat" argument
                     (lambda (result)
                       (fettle--chat-finish result)
                       (fettle--report result))
                     (lambda (text)
                       (fettle--chat-finish (list :status "error" :summary text))))
    (message "Fettle: working on it (*fettle-chat* shows what it does)")))

;;;###autoload
(defun fettle-fix ()
  "Run the repair loop on this buffer's problems."
  (interactive)
  (fettle--execute (fettle--server) "fettle.fixDiagnostics"
                   (list :uri (eglot--path-to-uri (buffer-file-name)))
                   #'fettle--report)
  (message "Fettle: fixing this file (M-x fettle-log shows what it does)"))

;;;###autoload
(defun fettle-undo (&optional force)
  "Restore every file the last task changed, byte for byte.
A file changed since the task is left alone; with a prefix argument
FORCE (\\[universal-argument] \\[fettle-undo]) it is restored too, and
its later changes are lost."
  (interactive "P")
  (fettle--execute (fettle--server) "fettle.undo" (if force '(:force t) eglot--{})
                   (lambda (result)
                     (message "Fettle: restored %d file(s)"
                              (length (plist-get result :restored))))))

;;;###autoload
(defun fettle-cancel ()
  "Cancel the running task."
  (interactive)
  (fettle--execute (fettle--server) "fettle.cancel" eglot--{}))

;;;###autoload
(defun fettle--models-health (models)
  "MODELS (`fettle/stats' :models) in words: each model's state and why."
  (if (null models)
      "no model health reported (a remote model reports after its first request)"
    (mapconcat (lambda (m)
                 (let ((reason (plist-get m :reason)))
                   (format "model %s %s%s" (plist-get m :model) (plist-get m :state)
                           (if (and reason (not (equal (plist-get m :state) "ok")))
                               (format " (%s)" reason)
                             ""))))
               models "; ")))

(defun fettle-stats ()
  "Show Fettle's local statistics and its models' health (`fettle/stats')."
  (interactive)
  (jsonrpc-async-request
   (fettle--server) :fettle/stats eglot--{}
   :success-fn (lambda (result)
                 (let ((completions (plist-get result :completions))
                       (edit (plist-get result :edit))
                       (models (append (plist-get result :models) nil)))
                   (message "Fettle: %s suggestions shown, %s accepted; %s rewrites, %s applied; %s"
                            (or (plist-get result :shown) (plist-get completions :shown) 0)
                            (or (plist-get result :accepted) (plist-get completions :accepted) 0)
                            (or (plist-get edit :requested) 0)
                            (or (plist-get edit :applied) 0)
                            (fettle--models-health models))))
   :error-fn (lambda (err) (message "Fettle: %s" (plist-get err :message)))))

;;;###autoload
(defun fettle-diff ()
  "Show the diff of the last task that changed files."
  (interactive)
  (let ((diff (plist-get fettle--last-change :diff)))
    (unless (and diff (not (string-empty-p diff)))
      (user-error "Fettle: no finished task with changes in this session"))
    (with-current-buffer (get-buffer-create "*fettle-diff*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert diff))
      (diff-mode)
      (setq buffer-read-only t)
      (goto-char (point-min))
      (display-buffer (current-buffer)))))

;;; The conversation: `*fettle-chat*'

(defun fettle--chat-buffer ()
  (let ((buffer (get-buffer-create "*fettle-chat*")))
    (with-current-buffer buffer
      (unless (derived-mode-p 'special-mode)
        (special-mode)))
    buffer))

(defun fettle--chat-insert (text &optional raw)
  "Append TEXT to `*fettle-chat*' as a line of its own, or as it is (RAW:
the model's text as it streams)."
  (with-current-buffer (fettle--chat-buffer)
    (let ((inhibit-read-only t)
          (follow (mapcar (lambda (w) (cons w (= (window-point w) (point-max))))
                          (get-buffer-window-list (current-buffer) nil t))))
      (save-excursion
        (goto-char (point-max))
        (if raw
            (insert text)
          (unless (bolp) (insert "\n"))
          (insert text "\n")))
      (dolist (w follow)
        (when (cdr w) (set-window-point (car w) (point-max)))))))

(defun fettle--chat-begin (message continued)
  "A chat MESSAGE sent; CONTINUED when it follows the earlier ones."
  (unless continued
    (setq fettle--chat-turns 0)
    (when (> (buffer-size (fettle--chat-buffer)) 0)
      (fettle--chat-insert "\n--- new conversation ---")))
  (setq fettle--chat-running (list :task nil)
        fettle--chat-streaming nil)
  (fettle--chat-insert (format "\nYou: %s\n\nFettle:" message))
  (display-buffer (fettle--chat-buffer) '(nil (inhibit-same-window . t))))

(defun fettle--chat-event (task kind text)
  "The running chat's event KIND of TASK with TEXT, in the conversation."
  (when fettle--chat-running
    (let ((text (or text "")))
      (when (and (null (plist-get fettle--chat-running :task))
                 (equal kind "status") (string-prefix-p "Started:" text))
        ;; The agent's first event names the task.
        (setq fettle--chat-running (list :task task)))
      (when (equal task (plist-get fettle--chat-running :task))
        (if (equal kind "text")
            (progn
              (setq fettle--chat-streaming t)
              (fettle--chat-insert text t))
          (setq fettle--chat-streaming nil)
          ;; A step's first line; what follows a status (the suspects, a
          ;; test command's last lines) indented below, a few lines at most.
          (let ((parts (split-string text "\n")))
            (fettle--chat-insert (concat "  · " (car parts)))
            (dolist (line (and (equal kind "status") (seq-take (cdr parts) 8)))
              (fettle--chat-insert (concat "    " line)))))))))

(defun fettle--chat-finish (result)
  "The chat's RESULT: its summary ends the turn."
  (setq fettle--chat-running nil
        fettle--chat-streaming nil)
  (let ((turns (plist-get (plist-get result :conversation) :turns)))
    (cond (turns (setq fettle--chat-turns turns))
          ((plist-get result :taskId) (setq fettle--chat-turns (1+ fettle--chat-turns)))))
  (fettle--chat-insert (format "\n[%s]\n%s" (or (plist-get result :status) "?")
                               (string-trim (or (plist-get result :summary) "")))))

;;; The log of `fettle/taskEvent'

(defvar fettle--log-last-text-task nil
  "The task whose streamed model text the log's last line holds.")

(defun fettle--log-buffer ()
  (let ((buffer (get-buffer-create "*fettle-log*")))
    (with-current-buffer buffer
      (unless (derived-mode-p 'special-mode)
        (special-mode)))
    buffer))

(defun fettle--log-event (task kind text)
  "Append the event KIND of TASK with TEXT to `*fettle-log*'."
  (with-current-buffer (fettle--log-buffer)
    (let ((inhibit-read-only t)
          (follow (mapcar (lambda (w) (cons w (= (window-point w) (point-max))))
                          (get-buffer-window-list (current-buffer) nil t))))
      (save-excursion
        (goto-char (point-max))
        (if (and (equal kind "text") (equal task fettle--log-last-text-task))
            ;; Streamed model text continues the line it started.
            (progn (when (bolp) (delete-char -1))
                   (insert (replace-regexp-in-string "\n" "\n  " text) "\n"))
          (insert (format "[%s] %s: %s\n" task kind
                          (replace-regexp-in-string "\n" "\n  " (or text ""))))))
      (setq fettle--log-last-text-task (and (equal kind "text") task))
      (dolist (w follow)
        (when (cdr w) (set-window-point (car w) (point-max)))))))

(cl-defmethod eglot-handle-notification
  ((_server fettle-server) (_method (eql fettle/taskEvent)) &key taskId kind text &allow-other-keys)
  "Log what the agent or a rewrite did."
  (fettle--log-event taskId kind text)
  (fettle--chat-event taskId kind text)
  (fettle--echo-progress kind text))

(defun fettle--echo-progress (kind text)
  "Echo the first line of TEXT, an event of KIND, as the task's progress."
  (when (and fettle-show-progress
             (member kind '("status" "verify"))
             (not (get-buffer-window "*fettle-log*" t))
             (not (active-minibuffer-window)))
    (let ((line (car (split-string (or text "") "\n")))
          (message-log-max nil))
      (message "Fettle: %s"
               (truncate-string-to-width line (max 20 (- (frame-width) 10)) nil nil "…")))))

;;;###autoload
(defun fettle-log ()
  "Show `*fettle-log*': the model's text, tool calls, results, edits, checks."
  (interactive)
  (pop-to-buffer (fettle--log-buffer)))

;;; Ghost text

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

(provide 'fettle)
;;; fettle.el ends here
